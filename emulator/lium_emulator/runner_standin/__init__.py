"""The ``dstack-runner`` the emulator serves to its pods: a Python stand-in for dstack's Go binary.

The real runner cannot be downloaded here, so pods get ``dstack_runner.py`` (one self-contained,
stdlib-only script with a ``#!/usr/bin/python3`` shebang) under the download URL dstack builds.
"""

from __future__ import annotations

import json
import re
from importlib import resources

DEFAULT_VERSION = "0.22.5"
_VERSION_LINE = re.compile(rb'^VERSION = "[^"\n]*"', re.MULTILINE)
_VALID_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def runner_standin_script(version: str | None = None) -> bytes:
    """The script's bytes; its healthcheck reports ``version`` (the one in the download URL) or the default."""
    version = version or DEFAULT_VERSION
    if not _VALID_VERSION.fullmatch(version):
        raise ValueError(f"invalid runner version {version!r}")
    script = resources.files(__name__).joinpath("dstack_runner.py").read_bytes()
    return _VERSION_LINE.sub(b"VERSION = " + json.dumps(version).encode(), script, count=1)
