"""Which plans compute every edge from that edge's own inputs alone (``order_free``).

A plan runs a graph's edges in internal order (grouped by relation, sorted by destination). A whole-graph
``apply_edges`` whose every edge row comes from node rows gathered by its source or destination (an SDDMM of
node rows included), its own edge features and row-wise (Dense) operators drawing no random numbers computes
the same rows in any order: ``runtime.plan`` may run it in the user's edge order instead (``run_plan``).
So may a whole-graph ``update_all`` built of those and of aggregations that take the edges in any order
and sum each destination's in the same order either way: ``edge_expr_aggregate`` (its CSR is a stable
sort of the destinations, so a destination's edges keep their user order, which is also their internal
order) and ``zero_unreached`` (in-degrees).
"""

from __future__ import annotations

import inspect

from ..ir import operators as ops
from ..ir.mpdfg import MPDFG
from .passes.patterns import is_random

_GATHERS = (ops.gather_src, ops.gather_dst)
_NODE_SIDES = ("src", "dst", "dst_local")  # u_op_v's operand rows: nodes, not (relation, node) pairs
_ROW_WISE = ("Dense", "Dense(recomputed)")  # a recomputed value is rebuilt in backward as its forward made it
_BOUND_AS_IS = ("ctx", "ndata", "edata")  # placeholders bound the same way in either order (edata: permuted)
_KINDS = ("apply_edges", "update_all")
_ANY_EDGE_ORDER = (ops.edge_expr_aggregate, ops.zero_unreached)  # read the context's edges in its order


def _of_node_rows(sddmm) -> bool:
    """Whether a ``u_op_v`` node's operands are node rows, not (relation, node) pair tables."""
    bound = inspect.signature(ops.u_op_v).bind(*sddmm.args, **sddmm.kwargs)
    bound.apply_defaults()
    return bound.arguments["a_side"] in _NODE_SIDES and bound.arguments["b_side"] in _NODE_SIDES


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
            if n.target in _GATHERS or n.target in _ANY_EDGE_ORDER:
                continue
            if n.target is ops.u_op_v and _of_node_rows(n):
                continue
            reads_structure = any(a.op == "placeholder" and a.meta["input"][0] == "ctx" for a in n.all_input_nodes)
            if n.meta.get("move") not in _ROW_WISE or reads_structure or is_random(n, dfg.root):
                return False
    return True
