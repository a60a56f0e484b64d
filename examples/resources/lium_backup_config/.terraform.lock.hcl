# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:DQAb1u/Exc1/lAhF4EUNJZflRgbhwqj7tQkiey0JvAg=",
    "zh:e475eb8c2b3cb292a10db8e36448cda72b5aac129a8a0b6d0a8d2291a448b437",
  ]
}
