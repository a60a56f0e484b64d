terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

# Minting keys needs a browser session: LIUM_SESSION_TOKEN (or the provider's `session_token`).
provider "lium" {}

# One pipeline's key: it rents and manages, sees only the pods it rents, and Lium stops its pods at $200.
resource "lium_api_key" "pipeline" {
  name           = "train-pipeline"
  scopes         = ["read", "rent", "manage"]
  pod_visibility = "own"
  max_budget_usd = 200
}

# Hand it to the pipeline's CI as LIUM_API_KEY (a sensitive output; the state holds it too).
output "pipeline_key" {
  value     = lium_api_key.pipeline.secret
  sensitive = true
}
