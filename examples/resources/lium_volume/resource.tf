terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

resource "lium_volume" "datasets" {
  name        = "datasets"
  description = "shared training data, mounted at /mnt"
}
