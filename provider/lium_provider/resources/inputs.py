"""Input rules shared by every resource's model: declared once here, attached to fields as annotations.

Each rule is a pydantic ``AfterValidator``, so it runs wherever the model is validated — at plan time,
when Terraform validates the configuration — and its ``ValueError`` becomes an error diagnostic on the
attribute it annotates::

    name: Annotated[str, Attribute(required=True, ...), PRINTABLE_NAME]
"""

from __future__ import annotations

import unicodedata

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pydantic import AfterValidator


def refuse_control_characters(value: str | None) -> str | None:
    """``value`` unchanged, or ValueError if it holds a control character (newline, tab, NUL, ESC...).

    Names end up in API bodies, pod hostnames, logs and plan output, where a newline or an escape
    sequence splits or rewrites what a reader sees.
    """
    if value is not None:
        for position, character in enumerate(value):
            if unicodedata.category(character) == "Cc":
                raise ValueError(
                    f"contains a control character ({character!r} at position {position}): use one line "
                    "of printable text"
                )
    return value


def check_openssh_public_key(value: str | None) -> str | None:
    """``value`` unchanged if it is one OpenSSH public key line (``<type> <base64> [comment]``), else
    ValueError. ssh-ed25519, ecdsa-sha2-nistp256/384/521 and ssh-rsa keys are accepted (and the
    security-key ``sk-`` variants cryptography can parse); a key nobody holds the private half of
    would rent a pod that nobody can log into."""
    if value is None:
        return value
    line = value.strip()
    if "\n" in line or "\r" in line:
        raise ValueError("must be a single OpenSSH public key line, not several")
    try:
        load_ssh_public_key(line.encode())
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError) as exc:
        shown = f"{line[:40]}..." if len(line) > 40 else line
        raise ValueError(
            f"{shown!r} is not an OpenSSH public key line ({exc}): expected one like `ssh-ed25519 AAAA... "
            "comment` (ed25519, ecdsa or rsa), e.g. the content of ~/.ssh/id_ed25519.pub"
        ) from None
    return value


PRINTABLE_NAME = AfterValidator(refuse_control_characters)
"""For every name-like attribute (names, user names): no control characters."""

OPENSSH_PUBLIC_KEY = AfterValidator(check_openssh_public_key)
"""For attributes holding one OpenSSH public key line."""
