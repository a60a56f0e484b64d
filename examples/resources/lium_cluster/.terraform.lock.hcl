# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:Yx/a0VPEtUONxw5bWys5SiBqA/qtUfNgNjZ+VRCxIyM=",
    "zh:386d02abbb293285e590c7850e9c93f4b1113fd156da330082eb8fc8b3749e98",
  ]
}
