# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:2TEWtmsHfLK5S0FvAqxlyzz41TOwA3Jw9bK0wQ1ArUo=",
    "zh:4f613c7f186281d878e4f9d7ae0c0f36ffb4bf0d747b6b9a00739614311573d5",
  ]
}
