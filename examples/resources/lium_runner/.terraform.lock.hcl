# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:YeKLxNYrA+dxw+PPrWQt3VHM7olhlc97U4tlfXQensc=",
    "zh:91f3570ca91b8adde1a2d82666f8ed5e84b2358fbc73e14fb526bbe1cf317306",
  ]
}
