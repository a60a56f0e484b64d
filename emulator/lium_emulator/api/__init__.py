"""The HTTP routes: the Lium API under ``/api`` and the emulator's own ``/_emulator`` routes."""
