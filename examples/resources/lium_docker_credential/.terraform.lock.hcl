# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/lium-stacks/lium" {
  version = "0.1.0"
  hashes = [
    "h1:RnbQ1xGogdJh9erQR8uh9ZIvBmNbe841+az+8C3X9HY=",
    "zh:f9dc0fdb55869af21a7ad7308f3a934e2feeed6366c929f4a66b76d4501a5170",
  ]
}
