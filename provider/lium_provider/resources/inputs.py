"""Input rules shared by every resource's model: declared once here, attached to fields as annotations.

Each rule is a pydantic ``AfterValidator``, so it runs wherever the model is validated — at plan time,
when Terraform validates the configuration — and its ``ValueError`` becomes an error diagnostic on the
attribute it annotates::

    name: Annotated[str, Attribute(required=True, ...), PRINTABLE_NAME]
"""

from __future__ import annotations

import shlex
import unicodedata

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pydantic import AfterValidator

from lium_provider.api.models import is_lium_id

# What one execve of the container's entrypoint can carry (Linux): one argument or `KEY=value` string at
# most MAX_ARG_STRLEN (128 KiB with its NUL), and all of them together ARG_MAX (2 MiB with the usual 8 MiB
# stack). The template's own share is bounded below that, leaving room for the image's environment.
EXEC_STRING_BYTES = 128 * 1024 - 1
ENVIRONMENT_BYTES = 1024 * 1024
COMMAND_LINE_BYTES = 256 * 1024
# Control characters a shell script may hold (startup_commands); every other one is refused.
SCRIPT_WHITESPACE = frozenset("\t\n")


def refuse_control_characters(value: str | None) -> str | None:
    """``value`` unchanged, or ValueError if it holds a control character (newline, tab, NUL, ESC...).

    Names end up in API bodies, pod hostnames, logs and plan output, where a newline or an escape
    sequence splits or rewrites what a reader sees.
    """
    if value is not None and (found := _control_character(value)) is not None:
        raise ValueError(f"contains {found}: use one line of printable text")
    return value


def _control_character(value: str, allowed: frozenset[str] = frozenset()) -> str | None:
    """A description of the first control character of ``value`` not ``allowed``, or None."""
    for position, character in enumerate(value):
        if unicodedata.category(character) == "Cc" and character not in allowed:
            return f"a control character ({character!r} at position {position})"
    return None


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_command_line(value: str | None, allowed: frozenset[str] = frozenset()) -> str | None:
    """``value`` unchanged if the container can be started with it: split into words as a shell would
    (the emulator's reading of Lium's ``entrypoint`` and ``startup_commands``), no control character but
    ``allowed``, each word and all together within what one execve carries; else ValueError."""
    if value is None:
        return value
    if (found := _control_character(value, allowed)) is not None:
        raise ValueError(f"contains {found}, which no command line can carry to the container")
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"cannot be split into words as a shell would ({exc}): close every quote") from None
    for word in words:
        if _size(word) > EXEC_STRING_BYTES:
            raise ValueError(
                f"holds a word of {_size(word)} bytes; one argument may have at most {EXEC_STRING_BYTES} "
                "(Linux's limit for one execve string)"
            )
    if (total := sum(_size(w) + 1 for w in words)) > COMMAND_LINE_BYTES:
        raise ValueError(f"is {total} bytes as arguments; at most {COMMAND_LINE_BYTES}")
    return value


def check_script(value: str | None) -> str | None:
    """A command line that may span lines (``startup_commands``): tabs and newlines are allowed."""
    return check_command_line(value, SCRIPT_WHITESPACE)


def check_environment(value: dict[str, str] | None) -> dict[str, str] | None:
    """``value`` unchanged if every variable can reach the container's environment: a name without
    ``=`` or control characters, a value without NUL, each ``KEY=value`` and all of them within what
    one execve carries; else ValueError naming the variable."""
    if value is None:
        return value
    total = 0
    for name, text in value.items():
        if not name or "=" in name or _control_character(name) is not None:
            raise ValueError(
                f"{name!r} cannot be an environment variable's name: no `=` or control characters"
            )
        if "\0" in text:
            raise ValueError(f"{name}'s value contains a NUL character, which no environment can hold")
        size = _size(name) + 1 + _size(text)
        if size > EXEC_STRING_BYTES:
            raise ValueError(
                f"{name} is {size} bytes as `{name}=value`; one variable may have at most {EXEC_STRING_BYTES} "
                "(Linux's limit for one environment string)"
            )
        total += size + 1
    if total > ENVIRONMENT_BYTES:
        raise ValueError(f"the variables are {total} bytes together; at most {ENVIRONMENT_BYTES}")
    return value


def check_lium_id(value: str | None) -> str | None:
    """``value`` unchanged if it can be a Lium object's id (a lower-case UUID), else ValueError."""
    if value is not None and not is_lium_id(value):
        raise ValueError(
            f"{value!r} is not a Lium id: ids are lower-case UUIDs such as "
            "`3f1c2b9e-8d4a-4e6f-9a1b-2c3d4e5f6a7b` (a resource's `id`)"
        )
    return value


def check_pod_path(value: str | None) -> str | None:
    """A directory inside a pod: absolute, and never climbing out of where it points (``..``)."""
    if value is not None and (not value.startswith("/") or ".." in value.split("/")):
        raise ValueError(f'"{value}" must be an absolute path without `..`')
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

COMMAND_LINE = AfterValidator(check_command_line)
"""For one-line commands the container starts with (``entrypoint``)."""

SCRIPT = AfterValidator(check_script)
"""For the arguments after the image (``startup_commands``), which may span lines."""

ENVIRONMENT = AfterValidator(check_environment)
"""For the variables of a container's environment."""

LIUM_ID = AfterValidator(check_lium_id)
POD_PATH = AfterValidator(check_pod_path)
"""For attributes that reference a Lium object by id (``template_id``, ``executor_id``…)."""
