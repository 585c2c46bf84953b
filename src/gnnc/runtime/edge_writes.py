"""A compiled call's edge writes: what a message UDF wrote with ``edges.data[k] = v``.

The MP-DFG returns each written feature under ``(EDGE_WRITE, k)`` (``gnnc.ir.mpdfg``), in internal edge order.
Eager's batch stores such a write in the graph at once when the batch is every edge of the call's block (the
whole graph, or one relation; a partial call's compute graph is a block of its own, dropped after the call),
before the call writes its results; ``store`` does the same with the plan's values.
"""

from __future__ import annotations

from ..ir.mpdfg import EDGE_WRITE, MPDFG
from ..ir.rules import InferenceFailure
from .deferred import in_user_order
from .eager import edge_block


def check(dfg: MPDFG) -> None:
    """InferenceFailure (the call runs eagerly, which refuses it) unless every written value, as inferred,
    has one row per edge, as eager's batch requires."""
    for key, n in dfg.outputs.items():
        if isinstance(key, tuple) and key[0] == EDGE_WRITE and n.meta.get("res") != "E":
            raise InferenceFailure(
                f"edges.data[{key[1]!r}] = ...: the value written is not one row per edge", n.meta.get("source", "?")
            )


def store(g, rel, results: dict, user_order: bool = False) -> dict:
    """Store the written features of ``results`` (a plan's run on block ``rel`` of ``g``, in internal edge
    order, or in the user's when ``user_order``) in that block's edge data, in user edge order; the call's own
    results (the rest) are returned."""
    lo, hi = edge_block(g, rel)
    frame = g.edata_all if rel is None else g.edges[g.canonical_etypes[rel]].data
    rest = {}
    for key, value in results.items():
        if isinstance(key, tuple) and key[0] == EDGE_WRITE:
            frame[key[1]] = value if user_order else in_user_order(g, value, rel, lo, hi)
        else:
            rest[key] = value
    return rest
