terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

data "lium_templates" "mine" {
  name_prefix = "trainer"
}
