"""A local Lium: the Lium REST API served over real HTTP, with pods that are real Linux sandboxes.

Any Lium client (dstack's Lium backend, gpuhunt's ``LiumProvider``, Lium's SDK, the lium-stacks
Terraform provider) works against it unchanged by pointing its base URL at ``http://HOST:PORT/api``.
Start it with ``lium-emulator serve``; see docs/emulator.md.
"""

from lium_provider import __version__ as __version__  # one version for the whole lium-stacks distribution
