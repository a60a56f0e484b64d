# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:gqPlB7vvcR5WhA1MTU9Ar8mbOegOQ94jBKv6bJ7pV/A=",
    "zh:230543c97a0ee18306cdd9dea7e813448a2d073823351eaa5ddb11a464fc4bb7",
  ]
}
