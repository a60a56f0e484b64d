# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:OzV6W1+OmtMowe5KTy6tgI+6hwIeG8xrfaFEChk7WRs=",
    "zh:2a0c6aa70f44ce704928dea97c8f14eb0c243b099c48cf6efac06c89faa9898e",
  ]
}
