terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

data "lium_pod" "existing" {
  name = "trainer-0"
}
