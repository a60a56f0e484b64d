# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:L1i1/WaLRbQ5prLnTfGVNZn+omU7mz/y+Z/CSylCWEs=",
    "zh:b0200cd45f3fbc777137ef40a1cfca29480c9da4587cbfda893cd79f00c2da32",
  ]
}
