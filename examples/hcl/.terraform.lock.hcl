# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:QRgFQEh+drqa11TLBiG7Lr+/V2ZeXr8sJaToto+dY5k=",
    "zh:9c86dcb97413f2b064200a0201539027bf53ecd06a14307a5365236d98a3f111",
  ]
}
