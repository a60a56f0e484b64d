data "lium_pod" "existing" {
  name = "trainer-0"
}
