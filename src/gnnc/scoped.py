"""``scoped``: a context variable set for the duration of a ``with`` block."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def scoped(var: contextvars.ContextVar[T], value: T) -> Iterator[None]:
    """Set ``var`` to ``value`` inside the block; its previous value is back after it, even on error."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
