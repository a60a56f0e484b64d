# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:MwUP+XQS+uIXl7L6BfLWHdN6ZHXYPPBEpNe79IfmuyQ=",
    "zh:570ba768925adeeb1e35391edf90c497e8082cbc74cec9c09a1603cd6eebce0c",
  ]
}
