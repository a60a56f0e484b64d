terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "lium_docker_credential" "ghcr" {
  username            = "ci-bot"
  password_wo         = var.registry_password
  password_wo_version = 1 # bump to rotate
}

resource "lium_template" "private" {
  name                 = "private-trainer"
  image                = "ghcr.io/acme/trainer:2.1"
  docker_credential_id = lium_docker_credential.ghcr.id
}
