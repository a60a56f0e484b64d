# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:0da/LLjhMDO6GCvcu62ELjdaleI/goaJXSPixuMM3C4=",
    "zh:3554efdb46b7aaaf85a92cd4620879fab047862bb7432b2a76d10154cfc3a6b4",
  ]
}
