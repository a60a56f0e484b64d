# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:X+7MAySRgVfLQB0LzhkJF/kvLaOk924TG1j7AqN5VA0=",
    "zh:44efb15cb2d166ecd3d77e8c41fec8d11f654c8aaf4dcaa3724386159336299a",
  ]
}
