terraform {
  required_version = ">= 1.11" # write-only arguments (lium_docker_credential.password_wo)

  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

# Every argument is optional. Unset, they come from the environment: LIUM_API_URL (else
# https://lium.io/api), LIUM_API_KEY and LIUM_SSH_PRIVATE_KEY_FILE. The API key never belongs in a file.
provider "lium" {
  ssh_private_key_file = pathexpand("~/.ssh/id_ed25519")
}
