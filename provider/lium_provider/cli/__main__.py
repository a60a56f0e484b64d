"""``python -m lium_provider.cli``: the same as the ``lium-tf`` command."""

from lium_provider.cli import run

run()
