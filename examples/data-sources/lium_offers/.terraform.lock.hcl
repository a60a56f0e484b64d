# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:wgAElbKWGyT0HzvzanEysACC1kzgHdxVQ4ys7Do/rIU=",
    "zh:5c591267d837f42fac52a2b205b7ac8a134286100409d68ed44290781a64be97",
  ]
}
