"""The systems a run can time, by name.

A system turns a ``Case`` (the eager reference layer on its graph) into a
``Prepared`` runnable. ``eager`` is also the oracle every other system is
checked against; ``compiled`` is the same layer through ``gnnc.compile``
(its default backend: numba kernels on CPU when numba is installed, else
torch primitives), ``compiled-torch`` through the torch-primitive backend. Adding a system is one ``register`` call.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

import gnnc

from .case import Case, Prepared, prepared_like_eager
from .pyg_models import PYG, PYG_FAST, Pairing

REFERENCE = "eager"


@dataclass(frozen=True)
class System:
    """``prepare(case)`` builds the runnable; ``supports(model)`` says which models it has;
    ``available()`` is None when the system can run here, else why not; ``pairing(model)``
    is the PyG pairing behind it, if any (for notes and the 'differs' mark)."""

    name: str
    description: str
    prepare: Callable[[Case], Prepared]
    supports: Callable[[str], bool] = lambda model: True
    available: Callable[[], str | None] = lambda: None
    pairing: Callable[[str], Pairing | None] = lambda model: None


SYSTEMS: dict[str, System] = {}


def register(system: System) -> None:
    if system.name in SYSTEMS:
        raise ValueError(f"benchmark system {system.name!r} is already registered")
    SYSTEMS[system.name] = system


def _pyg_missing() -> str | None:
    if importlib.util.find_spec("torch_geometric") is None:
        return "torch_geometric is not installed (pip install -e '.[bench]')"
    return None


def _pyg_system(name: str, table: dict[str, Pairing], description: str) -> System:
    return System(name, description, lambda case: table[case.model.name].build(case),
                  supports=table.__contains__, available=_pyg_missing, pairing=table.get)


register(System(REFERENCE, "gnnc eager UDF executor (the semantic oracle)",
                lambda case: prepared_like_eager(case.eager, case)))
register(System("compiled", "gnnc.compile(layer), default backend (numba on CPU if installed)",
                lambda case: prepared_like_eager(gnnc.compile(case.eager), case)))
register(System("compiled-torch", "gnnc.compile(layer, backend='torch'): the reference primitives on torch ops",
                lambda case: prepared_like_eager(gnnc.compile(case.eager, backend="torch"), case)))
register(_pyg_system("pyg", PYG, "PyG built-in layer"))
register(_pyg_system("pyg-fast", PYG_FAST, "PyG's alternative built-in (FastRGCNConv)"))
