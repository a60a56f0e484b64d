# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:fs1RxqzO8nZvKaP6exUUwiAg/hoseshcz/tkKLPHRBA=",
    "zh:0a1b6acd8daa950e0982dd1a798c90daf8f2d045256157cbd585b76173007420",
  ]
}
