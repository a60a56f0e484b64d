# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:oUS0ixABlhkGmN0koHAKxdzBC6LFLNSJ+ebOdhLmMuA=",
    "zh:14ed4f2af12b58390702f26a3df901bad3fd9f275f02d774df9acc450541995c",
  ]
}
