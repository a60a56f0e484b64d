# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:7jOgnpSVsuzRATlMyxYIxrJxcmmx7GVMAnKhMi4B4sc=",
    "zh:0c2ab2d416bd0094a6a1dcbd621047110d7ea9eb61b405c8a0e33c967110a72f",
  ]
}
