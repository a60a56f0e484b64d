# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:BowRDx64lwoEvNGlnxTl1r7zDuCUw/RffhVtrk9U6oQ=",
    "zh:c67ae5cc09fe0e0ba6e82cb40b4dd97b7a1477b8afffb0681ce47f97e0387731",
  ]
}
