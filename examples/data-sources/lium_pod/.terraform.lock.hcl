# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:/D68kWPO3RK+xyOYFnJ5fPgoWbL11AO40wY8nc9pUbY=",
    "zh:d005db60959e6e5517ac45bee5e36898486020888d40b1b2a9dd69fb75e5d36f",
  ]
}
