import {
  to = lium_backup_config.checkpoints
  id = "6d1c0b9a-8e7f-4a6b-9c5d-4e3f2a1b0c9d"
}
