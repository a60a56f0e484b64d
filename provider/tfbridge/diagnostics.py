"""Diagnostics: the errors and warnings a provider hands back to Terraform.

Resources raise :class:`TFError` (or return :class:`Diagnostic` lists); the server turns them into
tfplugin6 diagnostics with attribute paths, so Terraform points at the offending line of the user's
configuration. Every summary and detail passes through the secret redactor first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

AttributePath = tuple[str | int, ...]
"""Where in a configuration a diagnostic points: attribute names, then list indexes or map keys."""


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    """One message for Terraform to show; ``path`` makes Terraform underline the attribute."""

    severity: Severity
    summary: str
    detail: str = ""
    path: AttributePath | None = None

    @classmethod
    def error(cls, summary: str, detail: str = "", path: Sequence[str | int] | None = None) -> Diagnostic:
        return cls(Severity.ERROR, summary, detail, tuple(path) if path is not None else None)

    @classmethod
    def warning(cls, summary: str, detail: str = "", path: Sequence[str | int] | None = None) -> Diagnostic:
        return cls(Severity.WARNING, summary, detail, tuple(path) if path is not None else None)

    def as_warning(self) -> Diagnostic:
        """The same message as a warning: for what must be said without failing the operation."""
        return Diagnostic(Severity.WARNING, self.summary, self.detail, self.path)


@dataclass
class TFError(Exception):
    """An error a resource raises to fail an operation with one or more clear diagnostics."""

    summary: str
    detail: str = ""
    path: Sequence[str | int] | None = None
    extra: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary)

    def diagnostics(self) -> list[Diagnostic]:
        return [Diagnostic.error(self.summary, self.detail, self.path), *self.extra]


def has_errors(diagnostics: Sequence[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)
