"""The Terraform provider for Lium (lium.io), built on :mod:`tfbridge`.

Kept import-free on purpose: Terraform times the provider's start until the handshake, and
``python -m lium_provider`` prints it before loading the provider (see :mod:`lium_provider.__main__`).
"""

__version__ = "0.1.0"
PROVIDER_SOURCE = "lium-stacks/lium"
# The provider program's side command that summarises a plan for ``lium-tf gitops plan``, warm from the
# provider's zygote (lium_provider.plan_summary.warm_summary).
PLAN_SUMMARY_COMMAND = "plan-summary"
