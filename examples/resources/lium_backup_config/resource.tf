terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

provider "lium" {}

resource "lium_template" "train" {
  name             = "train"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}

resource "lium_pod" "train" {
  name              = "train"
  template_id       = lium_template.train.id
  gpu               = "A100"
  termination_hours = 24
}

# Copy the checkpoints every 2 hours and keep each copy 3 days: they outlive the pod.
resource "lium_backup_config" "checkpoints" {
  pod_id          = lium_pod.train.id
  path            = "/root/checkpoints"
  frequency_hours = 2
  retention_days  = 3
}
