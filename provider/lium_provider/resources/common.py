"""Helpers every Lium resource shares: turning API errors into diagnostics."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from lium_provider.api.errors import LiumError, LiumNotFound
from tfbridge import TFError

T = TypeVar("T")


@contextmanager
def api_errors(action: str, path: tuple[str, ...] | None = None) -> Iterator[None]:
    """Report a failed API call as one diagnostic that says what was being done, never a traceback."""
    try:
        yield
    except LiumNotFound as exc:
        raise TFError(f"{action}: not found", str(exc), path=path) from None
    except LiumError as exc:
        raise TFError(f"{action} failed", str(exc), path=path) from None


def call(action: str, fn: Callable[[], T], path: tuple[str, ...] | None = None) -> T:
    with api_errors(action, path):
        return fn()
