terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

data "lium_cluster_offers" "four_nodes" {
  min_free_nodes = 4
}

output "fabrics" {
  value = [for o in data.lium_cluster_offers.four_nodes.offers : "${o.fabric_id} (${o.fabric_type}, ${length(o.free_nodes)} free)"]
}
