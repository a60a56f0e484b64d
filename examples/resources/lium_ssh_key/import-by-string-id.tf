import {
  to = lium_ssh_key.alice
  id = "6b5a4f3e-2d1c-4b0a-9f8e-7d6c5b4a3f2e"
}
