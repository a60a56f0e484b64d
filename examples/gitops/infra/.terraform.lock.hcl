# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:+ZdcOJ36DvDDG2rehkRZaT8coxPugiCffSjL9Ge94UY=",
    "zh:01d8c3cc6b3bbdcd7509f5726c47611afb58dfd6071edda87055739f27c8d392",
  ]
}
