import {
  to = lium_template.trainer
  id = "6f1c2a9e-3b1d-4c4e-9f8a-2d5e7b9c0a11"
}
