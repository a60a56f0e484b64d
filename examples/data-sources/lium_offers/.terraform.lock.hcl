# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:BXluJBUtkcV9xLdZtHbBtpgFj+2p5CnPk1jx/aOGeTU=",
    "zh:d905d131e08c8b9f6fd4776f659ffd24e40636bbc1cb4885a6a2ab4070a0c765",
  ]
}
