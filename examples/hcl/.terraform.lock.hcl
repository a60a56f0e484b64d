# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:MBAio6J9bBQCTnWxAoKEHp3Tk4d4H85mbLed5dy7w5E=",
    "zh:d2d6107c2fa10fa405b7f50f2aad627ef3dc610588a8a32573f787a636a0b228",
  ]
}
