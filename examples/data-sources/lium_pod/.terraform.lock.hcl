# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:rBE/a0Gpr5vHWIdPCX6QO3GG9I05o2G9+xfkzYOnTiQ=",
    "zh:13a4d2b01e9515f91dc40cb487daae1baba03dd7ae7fef07021e46300f69907e",
  ]
}
