# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:/rptlUkEGV0sYs4FocFriqnJWMAY1lCz9/0So9NCqgw=",
    "zh:57c1c2d26fd44c7ba1a10b0d08c93a0d96e1839e05156e249d0259f7c8d27930",
  ]
}
