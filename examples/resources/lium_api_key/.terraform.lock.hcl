# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:DliNbHnBLAnbFGevNfB3YYQWEpua0E2ib3/N120m6/0=",
    "zh:fdcffd78cdcb48b4980d5a2e21c48ccad67b2bcdae18c54dbe86fd2d3724fd54",
  ]
}
