# A team's GPU stack, planned on every pull request and applied on merge by
# ../.github/workflows/terraform.yml. State and its lock live in PostgreSQL, so
# two runs (CI or laptops) never apply at the same time.

terraform {
  required_version = ">= 1.6"

  required_providers {
    lium = { source = "lium-stacks/lium" }
  }

  # The connection string comes from the environment (PG_CONN_STR), never from git.
  # Each stack keeps its state in a schema of its own (the CDK stack in ../cdk uses
  # lium_gitops_cdk): Terraform keeps each workspace's state in the table
  # lium_gitops_hcl.states and holds a PostgreSQL advisory lock on it for the whole
  # of every plan or apply.
  backend "pg" {
    schema_name = "lium_gitops_hcl"
  }
}

# LIUM_API_KEY and LIUM_SSH_PRIVATE_KEY_FILE come from the environment.
provider "lium" {}

variable "gpu" {
  description = "GPU model of the trainer pods."
  type        = string
  default     = "RTX 4090"
}

variable "max_price_per_hour" {
  description = "Most a trainer pod may cost, USD per hour (all its GPUs)."
  type        = number
  default     = 0.8
}

variable "trainers" {
  description = "How many trainer pods to run."
  type        = number
  default     = 1
}

variable "termination_hours" {
  description = "Lium removes each trainer pod this many hours after it started (null: the provider's default_termination_hours, else never)."
  type        = number
  default     = null
}

resource "lium_template" "trainer" {
  name             = "trainer"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
  environment      = { HF_HOME = "/root/.cache/huggingface" }
}

resource "lium_pod" "trainer" {
  count              = var.trainers
  name               = "trainer-${count.index}"
  template_id        = lium_template.trainer.id
  gpu                = var.gpu
  max_price_per_hour = var.max_price_per_hour
  termination_hours  = var.termination_hours

  timeouts {
    create = "20m"
  }
}

output "ssh" {
  description = "SSH command of each trainer pod."
  value       = [for pod in lium_pod.trainer : "ssh -o UserKnownHostsFile=known_hosts -p ${pod.ssh_port} root@${pod.ssh_host}"]
}

output "known_hosts" {
  description = "Every trainer pod's pinned host key, one known_hosts line each: terraform output -raw known_hosts > known_hosts"
  value       = join("\n", lium_pod.trainer[*].known_hosts)
}

output "price_per_hour" {
  description = "What each trainer pod is billed, USD per hour."
  value       = { for pod in lium_pod.trainer : pod.name => pod.price_per_hour }
}
