"""The systems a run can time, by name.

A system turns a ``Case`` (the eager reference layer on its graph) into a
``Prepared`` runnable. ``eager`` is also the oracle every other system is
checked against; ``compiled`` is the same layer through ``gnnc.compile``
(its default backend: numba kernels on CPU when numba is installed, Triton
kernels on CUDA when triton is, else torch primitives), ``compiled-torch``
through the torch-primitive backend, ``compiled-no-<pass>`` with one of ``ABLATIONS`` switched off (run
only when named). ``pyg`` and ``pyg-fast``
are PyG's built-ins, ``pyg-compile`` the same under ``torch.compile``; ``dgl`` (DGL's built-ins) and
``dgl-udf`` (our UDFs run by DGL) run in the peer interpreter (``harness.peer``). Adding a system is
one ``register`` call.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import torch

import gnnc

from . import dgl_models, peer
from .case import Case, Prepared, prepared_like_eager
from .pyg_models import PYG, PYG_FAST, Pairing

REFERENCE = "eager"


@dataclass(frozen=True)
class System:
    """``prepare(case)`` builds the runnable; ``supports(model)`` says which models it has;
    ``available()`` is None when the system can run here, else why not; ``pairing(model)``
    is the PyG or DGL pairing behind it, if any (for notes and the 'differs' mark). A ``peer``
    system runs in the peer interpreter (``harness.peer``), never through ``prepare`` here;
    ``compiles``: its first call compiles (``first_call_ms`` in the results is compile + one call);
    ``cpu_only``: why it runs on the CPU only (None: on every device of ``devices.DEVICES``)."""

    name: str
    description: str
    prepare: Callable[[Case], Prepared]
    supports: Callable[[str], bool] = lambda model: True
    available: Callable[[], str | None] = lambda: None
    pairing: Callable[[str], Pairing | None] = lambda model: None
    peer: bool = False
    compiles: bool = False
    cpu_only: str | None = None
    default: bool = True  # in a run that names no systems (ablations are asked for by name)

    def missing(self, device: str) -> str | None:
        """Why this system cannot run on ``device`` here (one line), or None when it can."""
        if device != "cpu" and self.cpu_only:
            return f"runs on the CPU only: {self.cpu_only}"
        return self.available()


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
    return System(
        name,
        description,
        lambda case: table[case.model.name].build(case),
        supports=table.__contains__,
        available=_pyg_missing,
        pairing=table.get,
    )


def _compile_missing() -> str | None:
    why = _pyg_missing()
    if why:
        return why
    if shutil.which("g++") is None and shutil.which("c++") is None:
        return "torch.compile's CPU backend (inductor) needs a C++ compiler (g++), and none is on PATH"
    return None


def _compiled_pyg(case: Case) -> Prepared:
    """The PyG pairing's call under ``torch.compile`` (inductor), compiled on its first call."""
    p = PYG[case.model.name].build(case)
    return Prepared(p.module, torch.compile(p.call), p.view)


def _peer_prepare(case: Case) -> Prepared:
    raise RuntimeError("a peer system runs in the peer interpreter (harness.peer), not through prepare")


def _dgl_system(name: str, notes: dict[str, dgl_models.Note], description: str) -> System:
    table = {m: Pairing(n.layer, _peer_prepare, n.note, n.differs) for m, n in notes.items()}
    return System(
        name,
        description,
        _peer_prepare,
        supports=table.__contains__,
        available=peer.missing,
        pairing=table.get,
        peer=True,
        cpu_only="the peer environment holds DGL 2.1's PyPI wheel, a CPU-only build",
    )


register(
    System(
        REFERENCE, "gnnc eager UDF executor (the semantic oracle)", lambda case: prepared_like_eager(case.eager, case)
    )
)
register(
    System(
        "compiled",
        "gnnc.compile(layer), default backend (numba on CPU if installed, triton on CUDA)",
        lambda case: prepared_like_eager(gnnc.compile(case.eager), case),
        compiles=True,
    )
)
register(
    System(
        "compiled-torch",
        "gnnc.compile(layer, backend='torch'): the reference primitives on torch ops",
        lambda case: prepared_like_eager(gnnc.compile(case.eager, backend="torch"), case),
        compiles=True,
    )
)
# Passes whose effect the ablation systems measure (Hector's two optimizations, and recomputation in backward).
ABLATIONS = ("compact", "linear_reorder", "recompute")
for _pass in ABLATIONS:
    register(
        System(
            f"compiled-no-{_pass.replace('_', '-')}",
            f"gnnc.compile(layer, {_pass}=False)",
            lambda case, off=_pass: prepared_like_eager(gnnc.compile(case.eager, **{off: False}), case),
            compiles=True,
            default=False,
        )
    )
register(_pyg_system("pyg", PYG, "PyG built-in layer"))
register(_pyg_system("pyg-fast", PYG_FAST, "PyG's alternative built-in (FastRGCNConv)"))
register(
    System(
        "pyg-compile",
        "PyG built-in layer under torch.compile (inductor: C++ on CPU, Triton on CUDA)",
        _compiled_pyg,
        supports=PYG.__contains__,
        available=_compile_missing,
        pairing=PYG.get,
        compiles=True,
    )
)
register(_dgl_system("dgl", dgl_models.DGL, "DGL 2.1 built-in layer (peer interpreter, torch 2.2)"))
register(
    _dgl_system(
        "dgl-udf", dgl_models.DGL_UDF, "our layer's UDFs run by DGL 2.1's update_all (peer interpreter, torch 2.2)"
    )
)
