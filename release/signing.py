"""``SHA256SUMS`` and its detached GPG signature, which the registry protocol has Terraform verify.

The signing key is ``$LIUM_RELEASE_GPG_KEY`` (a key id or fingerprint in ``$GNUPGHOME`` or the default
keyring) when set: that is how a real release is signed. Without it a throwaway key is made once per
build directory (``<build>/gnupg``, no passphrase) for local use and tests; its public half is written
beside the artifacts either way, for the registry tree's ``signing_keys``. The gpg-agent a signing
starts is stopped again before returning.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from release.layout import SIGNATURE_SUFFIX

KEY_ENV = "LIUM_RELEASE_GPG_KEY"
THROWAWAY_UID = "lium-stacks local release (throwaway) <release@lium-stacks.invalid>"


@dataclass(frozen=True)
class SigningKey:
    """A secret key gpg can sign with: its keyring (None: gpg's default) and its long key id."""

    home: Path | None
    key_id: str

    def gpg(self, *args: str, capture: bool = True) -> str:
        home = ["--homedir", str(self.home)] if self.home else []
        result = subprocess.run(
            ["gpg", "--batch", "--quiet", "--no-tty", *home, *args],
            capture_output=capture,
            text=True,
            check=True,
        )
        return result.stdout or ""

    def public_key(self) -> str:
        """The ASCII-armored public key."""
        return self.gpg("--armor", "--export", self.key_id)


def write_sha256sums(files: list[Path], sums: Path) -> Path:
    """``<sha256 hex>  <name>`` lines for ``files`` (sorted by name), as ``sha256sum`` writes them."""
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n" for f in sorted(files)]
    sums.write_text("".join(lines))
    return sums


@contextmanager
def signing_key(build: Path) -> Iterator[SigningKey]:
    """The release key (``$LIUM_RELEASE_GPG_KEY``) or this build directory's throwaway key."""
    wanted = os.environ.get(KEY_ENV)
    home = None if wanted else build / "gnupg"
    if home is not None and not home.exists():
        home.mkdir(mode=0o700, parents=True)
        SigningKey(home, "").gpg(
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            THROWAWAY_UID,
            "rsa3072",
            "sign",
            "never",
        )
    try:
        listing = SigningKey(home, "").gpg("--with-colons", "--list-secret-keys", wanted or THROWAWAY_UID)
        key_id = next(line.split(":")[4] for line in listing.splitlines() if line.startswith("sec:"))
        yield SigningKey(home, key_id)
    finally:
        if home is not None:
            subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)


def sign(key: SigningKey, sums: Path) -> Path:
    """``<sums>.sig``: a binary detached signature (the form Terraform's registry client verifies)."""
    signature = sums.with_name(sums.name + SIGNATURE_SUFFIX)
    key.gpg("--yes", "--local-user", key.key_id, "--output", str(signature), "--detach-sign", str(sums))
    return signature
