# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:mfjTediO/0ZpZJnZUQdRkMAw9S6UQGvKbYmiq6cGHIc=",
    "zh:964e04a7ff5a71384d9985df4ec5a46de1fdeef2f4d567e7f51188972660a8b8",
  ]
}
