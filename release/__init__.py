"""``make release``: the wheel and sdist, the self-contained provider and everything Terraform installs it from.

Run from the repository root as ``python -m release [--dist dist]``; see docs/release.md.
"""
