"""The Lium zygote's preload holds what a pod's plan and create import, so no fork imports them again.

A module first imported in a fork is imported in every fork: gpuhunt (the offers) and paramiko (SSH)
cost ~90 and ~120 ms each, which every `terraform plan` and `apply` of a pod would pay.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: the test process itself may have imported any of these already.
_PROBE = """
import json, subprocess, sys, tempfile
from lium_provider.__main__ import _preload
_preload()
with tempfile.TemporaryDirectory() as scratch:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", scratch + "/k"], check=True)
    private_key = open(scratch + "/k").read()
before = set(sys.modules)
import httpx
httpx.Client().close()  # what configure makes the API client with
from lium_provider.domain.offers import find_offers  # what a pod's plan and create search offers with
from lium_provider.sshkeys import fetch_host_key, public_key_line
public_key_line(private_key)
fetch_host_key("127.0.0.1", 9, timeout=1.0)  # nothing listens there: only what trying costs
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_fork_imports_neither_the_offers_nor_ssh_for_a_pod() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    imported = json.loads(result.stdout.splitlines()[-1])
    assert not [
        m for m in imported if m.split(".")[0] in ("gpuhunt", "paramiko", "cryptography", "httpcore", "h11")
    ], imported
