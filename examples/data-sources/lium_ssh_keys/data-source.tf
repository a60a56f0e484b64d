terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}

# Every key on the account whose name starts with "ml-" (registered by lium_ssh_key, Lium's console or
# `lium` CLI) is authorised on the pod. With keys this configuration registers too (lium_ssh_key), add
# `depends_on = [lium_ssh_key.<name>]` here: the keys are then read after they exist, not before.
data "lium_ssh_keys" "team" {
  name_prefix = "ml-"
}

resource "lium_pod" "shared" {
  name            = "shared"
  template_id     = "8d7c6b5a-4f3e-4d2c-9b1a-0f9e8d7c6b5a"
  authorized_keys = data.lium_ssh_keys.team.keys[*].public_key
}
