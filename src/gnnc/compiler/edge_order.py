"""Which plans compute every edge from that edge's own inputs alone (``order_free``).

A plan runs a graph's edges in internal order (grouped by relation, sorted by destination). A whole-graph
``apply_edges`` whose every edge row comes from node rows gathered by its source or destination (an SDDMM of
node rows included), its own edge features and row-wise (Dense) operators drawing no random numbers computes
the same rows in any order: ``runtime.plan`` may run it in the user's edge order instead (``run_plan``).
So may a whole-graph ``update_all`` built of those and of aggregations that take the edges in any order
and reduce each destination's in the same order either way: the backends build a destination's edge list
by a stable sort (or sum with ``index_add_``, edge by edge), so a destination's edges keep their user
order, which is also their internal order; sums come out the same to the bit, and an extremum's tie goes
to the same edge. Those aggregations: ``segment_reduce``, ``edge_softmax``, ``zero_unreached`` (in-degrees),
and the fused ones whose operands are node rows (not (relation, node) pair tables): ``edge_expr_aggregate``,
``spmm``, ``scaled_spmm``, ``edge_softmax_aggregate``, ``sddmm_softmax_aggregate``. Their backward's sums
over a source's out-edges may round differently (a source's edges are not in the same relative order).
"""

from __future__ import annotations

import inspect

from ..ir import operators as ops
from ..ir.mpdfg import MPDFG
from .passes.patterns import is_random

_GATHERS = (ops.gather_src, ops.gather_dst, ops.gather_dst_local)
_NODE_SIDES = ("src", "dst", "dst_local")  # operand rows: nodes, not (relation, node) pairs
_ROW_WISE = ("Dense", "Dense(recomputed)")  # a recomputed value is rebuilt in backward as its forward made it
_BOUND_AS_IS = ("ctx", "ndata", "edata")  # placeholders bound the same way in either order (edata: permuted)
_KINDS = ("apply_edges", "update_all")
# Operators that read the context's edges in its order, each with the arguments naming which rows an operand
# is read by (each must be a node side).
_ANY_EDGE_ORDER = {
    ops.u_op_v: ("a_side", "b_side"),
    ops.segment_reduce: (),
    ops.edge_softmax: (),
    ops.zero_unreached: (),
    ops.edge_expr_aggregate: (),  # its sides are node rows, edge rows or shared tensors
    ops.spmm: ("x_side",),
    ops.scaled_spmm: (),  # reads x by source
    ops.edge_softmax_aggregate: ("x_side",),
    ops.sddmm_softmax_aggregate: ("b_side", "x_side"),
}


def _of_node_rows(n) -> bool:
    """Whether an ``_ANY_EDGE_ORDER`` node reads its operands as node rows, not (relation, node) pair tables."""
    sides = _ANY_EDGE_ORDER[n.target]
    if not sides:
        return True
    bound = inspect.signature(n.target).bind(*n.args, **n.kwargs)
    bound.apply_defaults()
    return all(bound.arguments[side] in _NODE_SIDES for side in sides)


def order_free(dfg: MPDFG) -> bool:
    """Whether ``dfg`` (an apply_edges or update_all MP-DFG) computes each edge's rows from that edge's inputs
    alone, and aggregates them in the same order in either edge order."""
    if dfg.kind not in _KINDS:
        return False
    for n in dfg.graph.nodes:
        if n.op == "placeholder":
            kind = n.meta["input"][0]
            if kind not in _BOUND_AS_IS and ("reach" not in n.meta or n.meta.get("per_edge")):
                return False
        elif n.op in ("call_function", "call_method", "call_module"):
            if n.target in _GATHERS or (n.target in _ANY_EDGE_ORDER and _of_node_rows(n)):
                continue
            reads_structure = any(a.op == "placeholder" and a.meta["input"][0] == "ctx" for a in n.all_input_nodes)
            if n.meta.get("move") not in _ROW_WISE or reads_structure or is_random(n, dfg.root):
                return False
    return True
