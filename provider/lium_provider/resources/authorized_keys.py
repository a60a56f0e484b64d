"""``authorized_keys`` of ``lium_pod`` and ``lium_cluster``: a team's keys beside ``ssh_public_key``.

Lium takes every key authorised for root in the rent (``user_public_key``, a list as Lium's SDK sends
it), so the keys are part of what a rent asks for: a change re-rents, and they count in the rent digest
of the Lium name (so a replacement's name differs from the replaced pod's).
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from pydantic import Field

from lium_provider.resources.inputs import OPENSSH_PUBLIC_KEY
from tfbridge import Attribute, PlanChange, RequiresReplace

MAX_AUTHORIZED_KEYS = 64
AUTHORIZED_KEYS = Attribute(
    optional=True,
    plan=(RequiresReplace(),),  # unless the same keys: plan_same_keys
    description="More public keys authorised for root SSH beside `ssh_public_key` (one OpenSSH line each; on "
    "every member of a cluster), so a team shares the machines: `data.lium_ssh_keys.<name>.keys[*].public_key` "
    "gives the account's. Lium takes them in the rent, so other keys re-rent (the same keys in another order "
    "do not).",
)
AuthorizedKeys = Annotated[
    list[Annotated[str, OPENSSH_PUBLIC_KEY]] | None, AUTHORIZED_KEYS, Field(max_length=MAX_AUTHORIZED_KEYS)
]
"""The ``authorized_keys`` field of ``lium_pod`` and ``lium_cluster``."""


class _Keyed(Protocol):
    @property
    def ssh_public_key(self) -> str | None: ...

    @property
    def authorized_keys(self) -> list[str] | None: ...


def key_identity(line: str) -> str:
    """What makes two OpenSSH public key lines one key: type and key, the comment aside."""
    return " ".join(line.split()[:2])


def authorized_beside(ssh_public_key: str | None, authorized_keys: list[str] | None) -> list[str]:
    """The ``authorized_keys`` a rent sends beside ``ssh_public_key``: each key once, that one left out."""
    seen = {key_identity(ssh_public_key)} if ssh_public_key else set()
    extra: list[str] = []
    for line in authorized_keys or []:
        if (identity := key_identity(line)) and identity not in seen:
            seen.add(identity)
            extra.append(line.strip())
    return extra


def plan_same_keys(change: PlanChange[Any], prior: _Keyed) -> None:
    """A new ``authorized_keys`` that authorises the same keys (in another order, one listed twice, the
    pod's own key listed, unset and empty, comments aside) is taken in place: nothing is re-rented."""
    if change.is_unknown("authorized_keys"):
        return

    def keys(value: list[str] | None) -> set[str]:
        return {key_identity(k) for k in authorized_beside(prior.ssh_public_key, value)}

    if keys(change.planned.authorized_keys) == keys(prior.authorized_keys):
        change.keep_in_place("authorized_keys")


def keys_digested(extra: list[str]) -> tuple[list[str], ...]:
    """What more keys add to a rent digest: nothing without any (so a one-key pod's digest is what it
    was before ``authorized_keys``), else their sorted list (their order changes no pod)."""
    return (sorted(extra),) if extra else ()


def rented_keys(ssh_public_key: str, authorized_keys: list[str] | None) -> str | list[str]:
    """A rent's ``user_public_key``: the one key as one string (the form dstack proved on Lium), or the
    list of every key authorised for root."""
    extra = authorized_beside(ssh_public_key, authorized_keys)
    return [ssh_public_key, *extra] if extra else ssh_public_key
