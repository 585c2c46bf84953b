"""Resolve the broadcast alignment of built-in binary messages once shapes are known.

Pattern: ``right_align(x, other)`` (``gnnc.function``: DGL's rule, unit
dims inserted after the edge dimension until ``x`` has ``other``'s rank),
which tracing keeps as an opaque call because ranks are unknown then.
Replacement: ``x`` itself when its rank is at least ``other``'s (the usual
case), else ``x.unsqueeze(1)`` repeated for the missing dims; after this
``u_mul_e`` and friends are plain element-wise operators that the fusion
passes recognise.
"""

from __future__ import annotations

from ...function import right_align
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node


def align(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    resolved = 0
    for n in [n for n in out.graph.nodes if n.op == "call_function" and n.target is right_align]:
        x, other = n.args
        gap = len(other.meta["shape"]) - len(x.meta["shape"])
        value = x
        with out.graph.inserting_before(n):
            for _ in range(max(gap, 0)):
                value = new_node(out.graph, n, "unsqueeze", (value, 1), op="call_method")
        n.replace_all_uses_with(value)
        out.graph.erase_node(n)
        resolved += 1
    if resolved:
        out.log.append(f"align: resolved {resolved} built-in message broadcasts from the operands' ranks")
    return rewrote(dfg, out)
