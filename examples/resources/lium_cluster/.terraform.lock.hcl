# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:WQlnbzZ92tmdvrFnuLEzb42m4QKwLQmmd407s1N5n/0=",
    "zh:b9b3673ebabd94833258dc902e45dfe1acac3457d90cc53c1ffd205fe6591803",
  ]
}
