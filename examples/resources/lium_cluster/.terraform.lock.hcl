# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:Xi+ZLmSsb7596vIMnMq5cXOzlt+EyzyuwrZT56j/Va8=",
    "zh:202a504c97ab083c96ab8b8b0f9945ebae523c33eef53baadefff9792b57df2a",
  ]
}
