import {
  to = lium_volume.datasets
  id = "3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99"
}
