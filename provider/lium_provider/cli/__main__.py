"""``python -m lium_provider.cli``: the same as the ``lium-tf`` command."""

import sys

from lium_provider.cli import main

sys.exit(main())
