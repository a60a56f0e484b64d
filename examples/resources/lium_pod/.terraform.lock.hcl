# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:GNfp/IN3EgOhRnhbgRTyPycT7Y/zJJWY2KF7H1JxoWM=",
    "zh:83ea531c9d2c28e503af12f98f05280ff58c1e808645a2cd486fdd487325029d",
  ]
}
