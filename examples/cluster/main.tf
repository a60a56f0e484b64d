# A two-node GPU cluster in plain HCL: whole nodes of one RDMA fabric, rented all or nothing, the dstack
# runner on every node, and a smoke test that runs a real collective across the nodes (allreduce.py: an
# all-reduce over TCP between the overlay addresses, and torch.distributed's gloo where torch is there)
# before the apply is done.
#
# Everything comes from the environment, as in examples/hcl:
#   LIUM_API_URL, LIUM_API_KEY, LIUM_SSH_PRIVATE_KEY_FILE, LIUM_RUNNER_DOWNLOAD_URL

terraform {
  required_version = ">= 1.6"

  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

provider "lium" {}

variable "nodes" {
  type        = number
  default     = 2
  description = "How many whole nodes the cluster has."
}

variable "rendezvous_seconds" {
  type        = number
  default     = 300
  description = "How long each node's smoke test waits for the others to join the collective."
}

locals {
  master_port = 29500
}

# Lium's cluster image, with the runner's sshd port (10022) published beside SSH.
resource "lium_template" "cluster" {
  name             = "cluster"
  image            = "daturaai/lium-cluster:1.2.0"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
  internal_ports   = [22, 10022]
}

resource "lium_cluster" "train" {
  name              = "train"
  node_count        = var.nodes
  template_id       = lium_template.cluster.id
  termination_hours = 6

  timeouts {
    create = "30m"
  }
}

# count, not for_each: the members are known only after the cluster is rented, their number before.
resource "lium_runner" "node" {
  count        = var.nodes
  pod_id       = lium_cluster.train.nodes[count.index].pod_id
  ssh_host_key = lium_cluster.train.nodes[count.index].ssh_host_key
  environment = {
    RANK        = tostring(count.index)
    WORLD_SIZE  = tostring(var.nodes)
    MASTER_ADDR = lium_cluster.train.nodes[0].overlay_ip
    MASTER_PORT = tostring(local.master_port)
    # read by allreduce.py only
    RENDEZVOUS_SECONDS = tostring(var.rendezvous_seconds)
  }
  smoke_test = ["echo ${filebase64("${path.module}/allreduce.py")} | base64 -d > /tmp/allreduce.py && python3 /tmp/allreduce.py"]
}

output "rendezvous" {
  description = "torchrun's --master_addr and --master_port."
  value       = "${lium_cluster.train.nodes[0].overlay_ip}:${local.master_port}"
}

output "world_size" {
  value = var.nodes
}

output "ssh" {
  description = "SSH into each node as root, in rank order, checking its pinned host key in ./known_hosts."
  value       = [for n in lium_cluster.train.nodes : "ssh -o UserKnownHostsFile=known_hosts -p ${n.ssh_port} root@${n.ssh_host}"]
}

output "known_hosts" {
  description = "Every node's pinned host key, one known_hosts line each: terraform output -raw known_hosts > known_hosts"
  value       = join("\n", lium_cluster.train.nodes[*].known_hosts)
}

output "collective" {
  description = "What each node's all-reduce printed."
  value       = lium_runner.node[*].smoke_test_output
}

output "price_per_hour" {
  value = lium_cluster.train.price_per_hour
}
