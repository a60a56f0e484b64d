terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

resource "lium_template" "trainer" {
  name             = "trainer"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
  environment      = { HF_HOME = "/root/.cache/huggingface" }
  internal_ports   = [22, 10022]
}
