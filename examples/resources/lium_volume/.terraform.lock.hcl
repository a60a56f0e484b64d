# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:gkYqk+iArMpdw8+ruehnhcFGM0Fa/bXgdw6YwX1m+rU=",
    "zh:856b3408b6c4fc1970daf2c6d52658025b9849ceaa8311096d25841c07c09a50",
  ]
}
