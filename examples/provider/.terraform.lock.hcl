# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:NjrI1dQblhM0hDF0f1Mc8FrZdsPZOs2WNwI8SqoKuUE=",
    "zh:fc96f2f12077fdbc8294d3789c947e4858dbc2438a9c1656418110761c172827",
  ]
}
