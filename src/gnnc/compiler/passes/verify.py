"""The debug-mode check after each pass: the MP-DFG it left is well-formed.

On when the environment sets ``GNNC_VERIFY_PASSES`` (to anything but ``0``; the test suite does): after every
pipeline step ``optimize`` checks the graph (``fx.Graph.lint``: operands defined before use, one output),
that every operator carries the annotations the next pass reads (a residency on every operator, a shape on
every result, refreshed by the driver's ``annotate``), and that the call's outputs are all still produced. A
failure names the pass.
"""

from __future__ import annotations

import os

import torch.fx as fx

from ...ir.mpdfg import MPDFG

ENV = "GNNC_VERIFY_PASSES"


class MalformedMPDFG(RuntimeError):
    """A pass left an MP-DFG that breaks the invariants every pass relies on."""


def verifying() -> bool:
    """Whether the debug-mode check is on (``GNNC_VERIFY_PASSES`` set, not ``0``)."""
    return os.environ.get(ENV, "") not in ("", "0")


def check(dfg: MPDFG, after: str, outputs: frozenset, annotated: bool) -> None:
    """Raise ``MalformedMPDFG`` naming pass ``after`` unless ``dfg`` is well-formed, produces every key in
    ``outputs`` and, when ``annotated``, has a residency on every operator and a shape on every result."""
    try:
        dfg.graph.lint()
    except RuntimeError as err:
        raise MalformedMPDFG(f"pass {after} left an MP-DFG that fails fx's lint: {err}") from err
    missing = outputs - set(dfg.outputs)
    if missing:
        raise MalformedMPDFG(f"pass {after} dropped the outputs {sorted(missing, key=repr)}")
    if annotated:
        bare = [n.name for n in dfg.graph.nodes if n.op != "output" and not ("res" in n.meta and "move" in n.meta)]
        if bare:
            raise MalformedMPDFG(f"pass {after} left operators without a residency: {bare}")
        shapeless = [v.name for v in dfg.outputs.values() if isinstance(v, fx.Node) and v.meta.get("shape") is None]
        if shapeless:
            raise MalformedMPDFG(f"pass {after} left results without a shape: {shapeless}")
