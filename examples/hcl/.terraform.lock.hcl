# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:Ma0RqmxmzhpKFhNhXMAneTZdAMJjzodwms3o1Rb420k=",
    "zh:724392fe3ea036e3c3924a6c0086691e03ae515e0102c89f52bfead048920659",
  ]
}
