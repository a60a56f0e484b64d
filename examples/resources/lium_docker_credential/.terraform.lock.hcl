# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:df9x9DgL1x5CFDKKeXCI5Vx9F829I795Op7V6Y955Bo=",
    "zh:aa905eb7b0384a5ac837b31851fb0ab870de56cd4cdb4feb43ba9927fb4d762a",
  ]
}
