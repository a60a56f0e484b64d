# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:dxXiVMWwRhdcRm/DmBp7+up1Vld14P8D+ue1ebkwJM8=",
    "zh:a5beecfdda84aa92db6185372af772c608ff4a86d467845ec56480692883d29f",
  ]
}
