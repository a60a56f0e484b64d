terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

provider "lium" {}

variable "old_pod_id" {
  type = string
}

# The backups of a pod, newest first.
data "lium_backups" "old" {
  pod_id = var.old_pod_id
}

resource "lium_template" "train" {
  name             = "train"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}

# A new pod that starts from the newest restorable backup, restored into /root/restored.
resource "lium_pod" "resumed" {
  name              = "resumed"
  template_id       = lium_template.train.id
  gpu               = "A100"
  termination_hours = 24
  restore_backup_id = data.lium_backups.old.latest_completed_id
  restore_path      = "/root/restored"
  lifecycle {
    ignore_changes = [restore_backup_id] # restored once, at rent
  }
}
