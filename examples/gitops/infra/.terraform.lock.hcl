# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:u3vBoWUu6dirAnRioyC9yqJuFANbZxrCjSc48jhrXcA=",
    "zh:d1663dc19576cf6e50081444dde0a9160d98c4df7c16562e41f1eca008e896ca",
  ]
}
