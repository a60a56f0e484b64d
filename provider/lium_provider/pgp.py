"""Encrypting a secret to a user's OpenPGP public key, as Terraform's ``aws_iam_access_key`` does with its
``pgp_key``: the state then holds only what that key's owner can decrypt
(``terraform output -raw … | base64 -d | gpg --decrypt``).

GnuPG does the work (``gpg`` on PATH), in a throwaway home directory, so nothing touches the user's keyring.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import shutil
import subprocess
import tempfile

GPG_TIMEOUT_SECONDS = 30.0


class PgpError(ValueError):
    """The public key is unusable, or GnuPG is missing or failed; ``str()`` never holds the secret."""


def encrypt_to(public_key_b64: str, secret: str) -> str:
    """``secret`` encrypted to the OpenPGP public key ``public_key_b64`` (its binary form, base64), as
    base64 of the binary message."""
    try:
        public_key = base64.b64decode(public_key_b64.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise PgpError(
            "pgp_key is not base64 (give the binary public key, `gpg --export KEY | base64 -w0`)"
        ) from None
    gpg = shutil.which("gpg")
    if gpg is None:
        raise PgpError("pgp_key needs GnuPG: no `gpg` on PATH")
    with tempfile.TemporaryDirectory(prefix="lium-pgp-") as home:
        base = [gpg, "--homedir", home, "--batch", "--quiet", "--no-tty"]
        try:
            _run([*base, "--import"], public_key)
            listing = _run([*base, "--with-colons", "--list-keys"], b"").decode(errors="replace")
            fingerprints = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]
            if not fingerprints:
                raise PgpError("pgp_key holds no OpenPGP public key")
            message = _run(
                [*base, "--trust-model", "always", "--encrypt", "--recipient", fingerprints[0]],
                secret.encode(),
            )
        finally:  # an agent gpg started for this home ends with it
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    ["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True, timeout=10
                )
    return base64.b64encode(message).decode()


def _run(argv: list[str], data: bytes) -> bytes:
    try:
        done = subprocess.run(argv, input=data, capture_output=True, timeout=GPG_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PgpError(f"gpg failed: {type(exc).__name__}") from None
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no reason"]
        raise PgpError(f"gpg failed on pgp_key: {reason[0][:200]}")
    return done.stdout
