# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:X2OyfLb67+LTvY23v77mvdTes/4Chthh04hTv9XvOMI=",
    "zh:d78418fed6b66e2eb116d1a557554cb420867165b0582ff50d546ea9f062433a",
  ]
}
