terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

variable "alice_public_key" {
  type        = string
  description = "Alice's OpenSSH public key line, e.g. file(\"keys/alice.pub\")."
}

# A teammate's key, registered on the Lium account (Lium shows it as `ml-alice.lium-stacks-<stack tag>`).
resource "lium_ssh_key" "alice" {
  name       = "ml-alice"
  public_key = var.alice_public_key
}

# Alice logs in to the pod as root, beside the provider's own key.
resource "lium_pod" "shared" {
  name            = "shared"
  template_id     = "8d7c6b5a-4f3e-4d2c-9b1a-0f9e8d7c6b5a"
  authorized_keys = [lium_ssh_key.alice.public_key]
}
