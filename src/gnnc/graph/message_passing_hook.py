"""The one call up from graph storage: a graph's message-passing methods run ``gnnc.message_passing``.

Graph storage sits below the compiler and the executors, so it does not import them. ``gnnc.message_passing``
registers itself here when it is imported (importing any part of gnnc imports it, through ``gnnc/__init__``),
and ``Graph.update_all`` and its siblings call through ``message_passing()``.
"""

from __future__ import annotations

import types

_REGISTERED: list[types.ModuleType] = []


def register(module: types.ModuleType) -> None:
    """Make ``module`` (``gnnc.message_passing``) what the graph's methods delegate to."""
    _REGISTERED[:] = [module]


def message_passing() -> types.ModuleType:
    """The registered message-passing module."""
    if not _REGISTERED:
        raise RuntimeError("gnnc.message_passing was not imported: import gnnc before calling a graph's methods")
    return _REGISTERED[0]
