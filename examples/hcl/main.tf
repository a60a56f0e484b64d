# The quickstart stack in plain HCL: one GPU pod on python:3.11-slim (the cheapest offer), with the dstack
# runner started on it and a smoke test that must pass before the apply is done.
#
# Everything comes from the environment, so this runs unchanged on lium.io and on the local emulator:
#   LIUM_API_URL               Lium API (unset: https://lium.io/api)
#   LIUM_API_KEY               the account's API key
#   LIUM_SSH_PRIVATE_KEY_FILE  the key the pod authorises for root (the pod derives its public key from it)
#   LIUM_RUNNER_DOWNLOAD_URL   where pods fetch the runner (unset: dstack's official download)

terraform {
  required_version = ">= 1.6"

  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

provider "lium" {}

resource "lium_template" "quickstart" {
  name             = "quickstart"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}

resource "lium_pod" "quickstart" {
  name        = "quickstart-0"
  template_id = lium_template.quickstart.id

  timeouts {
    create = "20m"
  }
}

resource "lium_runner" "quickstart" {
  pod_id       = lium_pod.quickstart.id
  ssh_host_key = lium_pod.quickstart.ssh_host_key
  smoke_test   = ["nvidia-smi || echo no-gpu", "python3 -c 'print(42)'"]
}

output "ssh" {
  description = "SSH into the pod as root, checking its pinned host key in ./known_hosts (write it from the known_hosts output)."
  value       = "ssh -o UserKnownHostsFile=known_hosts -p ${lium_pod.quickstart.ssh_port} root@${lium_pod.quickstart.ssh_host}"
}

output "known_hosts" {
  description = "The pod's pinned host key as a known_hosts line: terraform output -raw known_hosts > known_hosts"
  value       = lium_pod.quickstart.known_hosts
}

output "runner_port" {
  description = "External port of the dstack runner's sshd (the pod's 10022)."
  value       = lium_runner.quickstart.runner_ssh_port
}

output "price_per_hour" {
  description = "What the pod is billed, USD per hour."
  value       = lium_pod.quickstart.price_per_hour
}

output "smoke_test" {
  description = "The last lines the smoke test printed."
  value       = lium_runner.quickstart.smoke_test_output
}
