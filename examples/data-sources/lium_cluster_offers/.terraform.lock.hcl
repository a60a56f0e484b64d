# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:bov05Y3jmm88W3KhRP6NxNVEzIub3Mul6AA5PQgl08s=",
    "zh:d63230294e07cd4e13f915b5b90a90ccdf08f6a409d342829ea59cf6cd46ff41",
  ]
}
