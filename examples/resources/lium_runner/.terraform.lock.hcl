# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:2mE7a2V+IJVAAOLw7RlBms4vrqwhqj7mP60COQHU0XQ=",
    "zh:82b49f54ebd83147de97aed678c739632ed1ad40c1e46dc8a508d0963551100f",
  ]
}
