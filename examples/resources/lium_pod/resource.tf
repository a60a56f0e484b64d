terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

variable "template_id" {
  type        = string
  description = "The lium_template the pod runs (its id)."
}

resource "lium_pod" "gpu" {
  name               = "trainer-0"
  template_id        = var.template_id
  gpu                = "RTX 4090"
  gpu_count          = 1
  max_price_per_hour = 0.80 # raising it later keeps the pod; a filter the pod no longer meets re-rents it
  regions            = ["us", "ca"]

  timeouts {
    create = "20m"
  }
}

output "ssh" {
  value = "ssh -o UserKnownHostsFile=known_hosts -p ${lium_pod.gpu.ssh_port} root@${lium_pod.gpu.ssh_host}"
}

output "known_hosts" { # terraform output -raw known_hosts > known_hosts
  value = lium_pod.gpu.known_hosts
}
