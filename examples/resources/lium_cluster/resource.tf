terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

resource "lium_cluster" "train" {
  name              = "train"
  node_count        = 2
  gpu               = "H100"
  termination_hours = 12 # every member is removed 12 h after the cluster started

  timeouts {
    create = "30m"
  }
}

output "master" {
  description = "Node 0's overlay address: torchrun's --master_addr."
  value       = lium_cluster.train.nodes[0].overlay_ip
}

output "ssh" {
  value = [for n in lium_cluster.train.nodes : "ssh -o UserKnownHostsFile=known_hosts -p ${n.ssh_port} root@${n.ssh_host}"]
}

output "known_hosts" { # terraform output -raw known_hosts > known_hosts
  value = join("\n", lium_cluster.train.nodes[*].known_hosts)
}
