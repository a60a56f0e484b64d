"""The arguments of the provider's resources: what a configuration can set, from their schemas."""

from __future__ import annotations

from typing import Any

from lium_provider.provider import LiumProvider
from tfbridge import Resource

RESOURCES: dict[str, type[Resource[Any]]] = {r.type_name: r for r in LiumProvider.resources}


def arguments_of(type_name: str) -> set[str]:
    """What a configuration can set: required and optional attributes, and nested blocks."""
    block = RESOURCES[type_name].schema().block
    return {n for n, a in block.attributes.items() if a.spec.required or a.spec.optional} | set(block.blocks)
