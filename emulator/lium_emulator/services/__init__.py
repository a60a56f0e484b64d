"""What Lium runs for a pod besides the pod itself: notebook servers and backups (docs/emulator.md#backups-and-notebooks)."""
