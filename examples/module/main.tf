# A reusable module: one GPU pod on a private template, kept alive for SSH. Its tests
# (tests/pod.tftest.hcl) run with `terraform test` against Lium or the local emulator.
#
# The provider is configured by the calling stack (or, for `terraform test`, from the environment:
# LIUM_API_URL, LIUM_API_KEY, LIUM_SSH_PRIVATE_KEY_FILE).

terraform {
  required_version = ">= 1.7"

  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

variable "name" {
  description = "Name of the template and the pod (the pod is \"<name>-0\")."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,40}$", var.name))
    error_message = "name must be lower-case letters, digits and hyphens, starting with a letter."
  }
}

variable "image" {
  description = "Docker image the pod runs."
  type        = string
  default     = "python:3.11-slim"
}

variable "gpu" {
  description = "GPU model to rent, as Lium names it (null: the cheapest offer of any model)."
  type        = string
  default     = null
}

resource "lium_template" "this" {
  name             = var.name
  image            = var.image
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}

resource "lium_pod" "this" {
  name        = "${var.name}-0"
  template_id = lium_template.this.id
  gpu         = var.gpu
}

output "pod_id" {
  description = "The pod's Lium id."
  value       = lium_pod.this.id
}

output "ssh" {
  description = "SSH into the pod as root, checking its pinned host key in ./known_hosts."
  value       = "ssh -o UserKnownHostsFile=known_hosts -p ${lium_pod.this.ssh_port} root@${lium_pod.this.ssh_host}"
}

output "known_hosts" {
  description = "The pod's pinned host key as a known_hosts line, for the ssh output's ./known_hosts."
  value       = lium_pod.this.known_hosts
}

output "price_per_hour" {
  description = "What the pod costs an hour, in USD."
  value       = lium_pod.this.price_per_hour
}
