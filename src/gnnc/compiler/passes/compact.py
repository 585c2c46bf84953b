"""Compact materialization (Hector 3.2.2): edgewise typed linear maps computed once per (relation, node) pair.

Pattern: ``etype_gather_matmul(x, W, side)`` — ``x[side[e]] @ W[rel(e)]``,
which depends only on the edge's (relation, source) pair (or destination
pair) — and its per-head form ``etype_gather_head_matmul``.
Replacement: ``gather_src_pair(etype_pair_matmul(x, W, "src"))`` (or the
dst forms): one row per unique pair, read by edges through the pair index
the graph builds once and caches. The gather is then moved down and fused
like a node gather (``reorder``, ``fuse``), so the [E, ...] value need
never exist. Exact: the pair row is the very product every edge of the
pair computed. Whether the pair table is compact or one pair per edge is
the cost model's choice per graph (``ir.context.Pairs``).
"""

from __future__ import annotations

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node, same_value

_PER_PAIR = {ops.etype_gather_matmul: ops.etype_pair_matmul, ops.etype_gather_head_matmul: ops.etype_pair_head_matmul}
_GATHER = {"src": ops.gather_src_pair, "dst": ops.gather_dst_pair}


def compact(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    for n in [n for n in g.nodes if n.op == "call_function" and n.target in _PER_PAIR]:
        ctx, x, weight = n.args[:3]
        side = n.kwargs.get("side", n.args[3] if len(n.args) > 3 else "src")
        with g.inserting_before(n):
            rows = new_node(g, n, _PER_PAIR[n.target], (ctx, x, weight, side))
            gathered = same_value(new_node(g, n, _GATHER[side], (ctx, rows)), n)
        n.replace_all_uses_with(gathered)
        g.erase_node(n)
        out.log.append(
            f"compact: {n.meta.get('source')}: typed linear computed once per (relation, {side}) pair, "
            f"read by edges through the pair index"
        )
    return rewrote(dfg, out)
