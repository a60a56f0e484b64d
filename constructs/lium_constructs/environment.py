"""What an app reads from the environment at synth time: only public material, never a secret.

The provider itself reads ``LIUM_API_URL``, ``LIUM_API_KEY`` and ``LIUM_SSH_PRIVATE_KEY_FILE`` when
Terraform runs, so none of them is written into ``cdk.tf.json``. Apps only need the *public* half of the
SSH key pair (for the runner's ``authorized_keys``), which sits next to the private key as ``<path>.pub``.
"""

from __future__ import annotations

import os
from pathlib import Path

SSH_KEY_ENV = "LIUM_SSH_PRIVATE_KEY_FILE"


def ssh_public_key_from_env() -> str | None:
    """The public key in ``$LIUM_SSH_PRIVATE_KEY_FILE.pub``, or None when the variable is unset.

    Raises FileNotFoundError with the expected path when the variable is set but the file is missing.
    """
    private = os.environ.get(SSH_KEY_ENV)
    if not private:
        return None
    public = Path(private + ".pub").expanduser()
    if not public.is_file():
        raise FileNotFoundError(f"{SSH_KEY_ENV} is set, but its public key {public} does not exist")
    return public.read_text().strip()
