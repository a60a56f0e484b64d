# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:siL4eIKLZJghuy2G7aN3sYGr86zILmpT8pRA7h8EhC8=",
    "zh:91b4556c86b48aca53a3218f3ffd71a4b27b16e641543eec6108d9fdf473d4c2",
  ]
}
