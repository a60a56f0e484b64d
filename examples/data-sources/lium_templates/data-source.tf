data "lium_templates" "mine" {
  name_prefix = "trainer"
}
