# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:yduM+1h8BdSt7LeKDsr4uiAsvesSdOr6imMwSGV9kVM=",
    "zh:0201a81c9da99a7b5281c1e1434062d8093ca6095f2a97a410c2f7bad0dd4a99",
  ]
}
