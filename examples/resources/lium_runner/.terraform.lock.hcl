# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:HQacPN6kCD44M6AH9G4QmjFC3xThHItrwhvAHqKXws4=",
    "zh:6c816a1bfaf9fd32f9bd4736c2834624bbe1cce058a7a778a144158d73c38e27",
  ]
}
