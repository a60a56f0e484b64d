# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:IHuNY5YECw8uQ97AMum4zx4qY8BLa8woep0KYB5eI9Y=",
    "zh:7dad9f9a8fa292a437b9588bf82ac57aa4ab9785304be09426f8b96be18ca676",
  ]
}
