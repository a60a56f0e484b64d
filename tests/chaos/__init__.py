"""Seeded chaos scenarios: real Terraform against the emulator under every fault it can inject.

``scenarios`` generates them deterministically from a seed, ``harness`` runs them (``twins`` runs two
stacks of the same names at once), ``audit`` checks the promise afterwards (nothing left, no second paid
pod, bounded billing, no secret and no traceback in any output, no stack touching another stack's
resource). docs/reliability.md records the last long run.
"""
