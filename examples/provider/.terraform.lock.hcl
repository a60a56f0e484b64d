# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:uKmF8UOkh0w4WpqqDyx1l1GeiKR+F/+XaXMucb0mDfc=",
    "zh:e04b93722df7dd3397e2c0db7413878d1328ffa4abcd12580021ef189cc75798",
  ]
}
