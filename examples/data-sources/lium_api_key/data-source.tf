terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

# What a key may still spend (read with LIUM_SESSION_TOKEN; never its secret). Its id: a lium_api_key's
# `id` (output it from the stack that declares the key), or `lium keys list --json`.
data "lium_api_key" "pipeline" {
  id = "3b2a1f0e-9d8c-4b7a-8f6e-5d4c3b2a1f0e"
}

output "left_of_max_budget" {
  value = data.lium_api_key.pipeline.max_budget_usd == null ? null : data.lium_api_key.pipeline.max_budget_usd - data.lium_api_key.pipeline.spent_total_usd
}
