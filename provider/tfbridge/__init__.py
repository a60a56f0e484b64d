"""tfbridge: a small framework for Terraform providers written in Python (plugin protocol 6.8).

It knows nothing about any cloud. A provider declares pydantic models for its configuration, resources
and data sources (:mod:`tfbridge.schema`), implements CRUD on :class:`Resource` subclasses, and is
served by :func:`tfbridge.plugin.main`. See docs/design.md for the layers and how a request flows.

Names are exported lazily: Terraform times a provider's start until the handshake line, so importing
``tfbridge.plugin`` must not pull in pydantic and the rest of the framework first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Cancelled": "tfbridge.cancel",
    "CancelToken": "tfbridge.cancel",
    "outliving_the_host": "tfbridge.cancel",
    "destroying": "tfbridge.command",
    "terraform_command": "tfbridge.command",
    "AttributePath": "tfbridge.diagnostics",
    "Diagnostic": "tfbridge.diagnostics",
    "Severity": "tfbridge.diagnostics",
    "TFError": "tfbridge.diagnostics",
    "Context": "tfbridge.resource",
    "current_context": "tfbridge.resource",
    "DataSource": "tfbridge.resource",
    "PlanChange": "tfbridge.plan",
    "Provider": "tfbridge.resource",
    "Resource": "tfbridge.resource",
    "Attribute": "tfbridge.schema",
    "Block": "tfbridge.schema",
    "RequiresReplace": "tfbridge.schema",
    "RequiresReplaceIf": "tfbridge.schema",
    "Schema": "tfbridge.schema",
    "UseStateForUnknown": "tfbridge.schema",
    "schema_of": "tfbridge.schema",
    "TIMEOUTS_BLOCK": "tfbridge.timeouts",
    "Timeouts": "tfbridge.timeouts",
    "parse_duration": "tfbridge.timeouts",
    "ConfigView": "tfbridge.values",
}

if TYPE_CHECKING:
    from tfbridge.cancel import Cancelled, CancelToken, outliving_the_host
    from tfbridge.command import destroying, terraform_command
    from tfbridge.diagnostics import AttributePath, Diagnostic, Severity, TFError
    from tfbridge.plan import PlanChange
    from tfbridge.resource import Context, DataSource, Provider, Resource, current_context
    from tfbridge.schema import (
        Attribute,
        Block,
        RequiresReplace,
        RequiresReplaceIf,
        Schema,
        UseStateForUnknown,
        schema_of,
    )
    from tfbridge.timeouts import TIMEOUTS_BLOCK, Timeouts, parse_duration
    from tfbridge.values import ConfigView


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfbridge' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "TIMEOUTS_BLOCK",
    "Attribute",
    "AttributePath",
    "Block",
    "CancelToken",
    "Cancelled",
    "ConfigView",
    "Context",
    "DataSource",
    "Diagnostic",
    "PlanChange",
    "Provider",
    "RequiresReplace",
    "RequiresReplaceIf",
    "Resource",
    "Schema",
    "Severity",
    "TFError",
    "Timeouts",
    "UseStateForUnknown",
    "current_context",
    "destroying",
    "outliving_the_host",
    "parse_duration",
    "schema_of",
    "terraform_command",
]
