# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:61Ojg4yva/KZ2tx/yPK0OJsao+RzDIyAWansveb2OJw=",
    "zh:b74d6a5fa7301ee92d54110a269940c4ae104417a85a66059ec913e9ccf6c8c0",
  ]
}
