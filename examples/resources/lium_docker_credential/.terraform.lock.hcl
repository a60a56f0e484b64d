# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:EmM+c5fgKpztJNkZ9fbRZbkGQm5x3YsDcPEfxSnePSA=",
    "zh:b0c17ae537e53ce5b308de167bb4da74f8e9bdda34b5f3d9efe3e080ecd931c7",
  ]
}
