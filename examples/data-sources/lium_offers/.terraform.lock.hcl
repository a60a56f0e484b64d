# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:KxkPMnIOGg1b4RtbLwYsDzlZdhWTagMvmVkAHZNBloQ=",
    "zh:e340df80e3d6f4d5593dba57d210c046b495618bdd8933b5234a7285d074da55",
  ]
}
