terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

variable "pod_id" {
  type        = string
  description = "The lium_pod to start the runner on (its id)."
}

variable "pod_ssh_host_key" {
  type        = string
  description = "The pod's pinned SSH host key (its lium_pod's ssh_host_key)."
}

variable "ssh_public_key" {
  type        = string
  description = "A public key the runner's own sshd accepts, e.g. file(\"~/.ssh/id_ed25519.pub\")."
}

resource "lium_runner" "trainer" {
  pod_id       = var.pod_id
  ssh_host_key = var.pod_ssh_host_key

  # The runner's own sshd (the pod's port 10022) also accepts these keys.
  authorized_keys = [var.ssh_public_key]
  environment     = { HF_HOME = "/root/.cache/huggingface" }

  # Run once through the runner, as the image user, before the apply is done.
  smoke_test = ["nvidia-smi", "python3 -c 'import torch; assert torch.cuda.is_available()'"]

  timeouts {
    create = "15m"
  }
}

output "runner_ssh_port" {
  value = lium_runner.trainer.runner_ssh_port
}
