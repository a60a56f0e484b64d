# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:/Of7p5dSUtLMLKTMJgEQAcNDqPrlG+ICniRRzbopLDs=",
    "zh:ad8999cd31a57a23c9d8d7a9ac8a373b807af0fdfc5460e25dc467235608d9f1",
  ]
}
