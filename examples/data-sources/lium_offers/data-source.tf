terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

data "lium_offers" "cheap_4090" {
  gpu                = "RTX 4090"
  max_price_per_hour = 1.0
  min_memory_gib     = 32
}

output "cheapest" {
  value = data.lium_offers.cheap_4090.offers[0]
}
