# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:FNSG08KOfxGNi5y3VnAusMF8cwkEm1c8PRyofav1sks=",
    "zh:e2db813984abb75b40449ffa819be7dc5a80c346774ca1044da5bc7c5819c2a4",
  ]
}
