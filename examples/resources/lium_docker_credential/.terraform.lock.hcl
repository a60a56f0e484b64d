# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:NOnYBrGbkKUFLhjGufdQ7c6KoZM+pCGpWG2FrvvA8rQ=",
    "zh:98aa6bb74db3c45f772ed117547540fcb5f6b3412203c51f8fdc78ab2028172e",
  ]
}
