# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:Eez9uEFKXWQ2RKXmNMAIPKeMbk8jjKzkwA7Vl7zEi98=",
    "zh:b7e55950d3e84f5bf56a0f89eb8de330abe9c8238eff4527009414623949b85a",
  ]
}
