# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:NXmcNtoh14LklUg2s94X29E54mOs2uNQ/t408nIUdAE=",
    "zh:7567d5125d4e28beef51c1d9b9f288067aebeeb854714c0da85d9a76cc32691b",
  ]
}
