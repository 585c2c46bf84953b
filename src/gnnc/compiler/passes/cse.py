"""Common-subexpression elimination.

Pattern: two nodes with the same operator, target, arguments and keyword
arguments, neither random (dropout draws new masks each time); and
``dst_nodes(x)`` in a whole-graph block (all nodes are destinations).
Replacement: the later one's uses point at the earlier one; ``x``.
"""

from __future__ import annotations

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .patterns import is_random, node_key


def cse(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    seen, merged = {}, 0
    for n in list(out.graph.nodes):
        if n.op in ("placeholder", "output") or is_random(n, out.root):
            continue
        if out.whole_graph and n.target is ops.dst_nodes:
            n.replace_all_uses_with(n.args[1])
            out.graph.erase_node(n)
            merged += 1
            continue
        key = node_key(n)
        if key in seen:
            n.replace_all_uses_with(seen[key])
            out.graph.erase_node(n)
            merged += 1
        else:
            seen[key] = n
    if merged:
        out.log.append(f"cse: merged {merged} repeated operators")
    return rewrote(dfg, out)
