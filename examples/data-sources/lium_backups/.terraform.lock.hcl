# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:PVUAI2kc5clwnYdbqQ5zWAYHCttG8ZcQgWxXBk112/8=",
    "zh:3d785f3475033e79aabcbbe46cafba214e0f9da6a0fcc363b3df918f3f063d3e",
  ]
}
