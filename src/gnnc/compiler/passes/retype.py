"""Per-type tables indexed by an edge feature run as relation-typed operators (Hector, types from data).

Pattern: a whole-graph plan that indexes shared float tables ``W`` ([T, ...])
with one integer edge feature ``t`` (edge data, or a tensor of the user's
with one entry per edge id): ``W[t]`` or ``W.index_select(0, t)`` (DGL's
``weight[edges.data['rel_type']]``, HGT's ``relation_att[etype]``) and the
typed matmuls ``index_typed`` made of such lookups (``index_gather_matmul``).
Replacement: the plan runs on ``retype(ctx, t)``, the same block with edge
e's relation ``t[e]`` (its edges grouped by type, built once per type tensor):
every operator's context becomes it, edge inputs are put in its edge order
(``edges_to``) and edge outputs back (``edges_from``), ``W[t]`` becomes
``gather_etype(type_rows(W))`` and a gathered typed matmul becomes the
relation-typed one — so ``typed_linear``, ``compact``, ``reorder``,
``linear_reorder`` and ``fuse`` treat the plan as they treat gnnc's own typed
layers (pair tables, weights multiplied first, fused softmax aggregation).

Not applied where the new edge order could change a result or the graph's
own types are used: reductions that pick the first tied edge (max, min),
mailbox UDFs (they see messages in edge order), random operators on edges,
and operators of the graph's node or relation types. On a plan already
moved, only lookups of the moved type feature are converted (passes that
run later may expose more).
"""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from ...ir import operators as ops
from ...ir.mpdfg import DEFERRED_INPUT, MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node
from .patterns import INDEX_DTYPES, is_call, table_lookup, type_feature_name, unsqueezed_then_squeezed

_TYPE_STRUCTURE = {
    ops.gather_etype,
    ops.gather_srctype,
    ops.gather_dsttype,
    ops.gather_ntype,
    ops.node_type_rows,
    ops.ntype_matmul,
    ops.dst_ntype_matmul,
    ops.etype_gather_matmul,
    ops.etype_gather_head_matmul,
    ops.etype_pair_matmul,
    ops.etype_pair_head_matmul,
    ops.gather_src_pair,
    ops.gather_dst_pair,
    ops.pair_etype_rows,
    ops.etype_spmm,
    ops.etype_bilinear_dot,
    ops.etype_sddmm_softmax_aggregate,
}
_RANDOM_FUNCTIONS = {
    F.dropout,
    F.alpha_dropout,
    F.feature_alpha_dropout,
    torch.dropout,
    torch.bernoulli,
    torch.rand_like,
    torch.randn_like,
    torch.randint_like,
    torch.multinomial,
    torch.normal,
}
_RANDOM_METHODS = {"bernoulli", "bernoulli_", "uniform_", "normal_", "random_", "exponential_"}


def _type_feature(t) -> bool:
    return (
        isinstance(t, fx.Node)
        and t.op == "placeholder"
        and (t.meta["input"][0] == "edata" or t.meta.get("per_edge", False))
        and len(t.meta.get("shape") or ()) == 1
        and t.meta.get("dtype") in INDEX_DTYPES
    )


def _table(w) -> bool:
    if not isinstance(w, fx.Node):
        return False
    shape, dtype = w.meta.get("shape"), w.meta.get("dtype")
    return w.meta.get("res") == "S" and bool(shape) and dtype is not None and dtype.is_floating_point


def _lookups(g: fx.Graph, types_of):
    """(node, table, types) of every ``W[t]`` and ``index_gather_matmul`` whose ``t`` passes ``types_of``."""
    found = []
    for n in g.nodes:
        if table_lookup(n) is not None:
            table, t = table_lookup(n)
        elif is_call(n, ops.index_gather_matmul):
            table, t = n.args[2], n.args[3]
        else:
            continue
        if _table(table) and types_of(t):
            found.append((n, table, t))
    return found


def _blocked(dfg: MPDFG, ctx: fx.Node) -> bool:
    """Whether moving the plan to another edge order or relation set could change a result."""
    root = dfg.root
    for n in dfg.graph.nodes:
        if n.op == "placeholder" and n.meta["input"][0] in ("ntype_data", "etype_data"):
            return True
        if n.op == "call_function" and n.target in _TYPE_STRUCTURE and n.args[0] is ctx:
            return True
        if is_call(n, ops.bucketed_reduce) or (is_call(n, ops.segment_reduce) and n.args[2] in ("max", "min")):
            return True
        random = (
            (n.op == "call_function" and n.target in _RANDOM_FUNCTIONS)
            or (n.op == "call_method" and n.target in _RANDOM_METHODS)
            or (
                n.op == "call_module"
                and isinstance(root.get_submodule(n.target), nn.modules.dropout._DropoutNd)
                and root.get_submodule(n.target).training
            )
        )
        if random and n.meta.get("res") == "E":
            return True
    return False


def _inherited(g: fx.Graph) -> list:
    """Placeholders of retyped contexts an inlined earlier apply_edges computed on."""
    return [
        n
        for n in g.nodes
        if n.op == "placeholder" and n.meta["input"][0] == DEFERRED_INPUT and n.meta["input"][1].endswith(".ctx")
    ]


def _move(out: MPDFG, ctx: fx.Node, moved: fx.Node) -> None:
    """Put the plan on context ``moved`` (a ``retype`` of ``ctx``, or an inherited retyped context): edge
    inputs into its edge order, edge outputs back, inlined values computed on it read as they are."""
    g = out.graph
    for user in [u for u in ctx.users if u is not moved]:
        user.replace_input_with(ctx, moved)
    anchor = moved if moved.op != "placeholder" else [n for n in g.nodes if n.op == "placeholder"][-1]
    for p in [
        p for p in g.nodes if p.op == "placeholder" and (p.meta["input"][0] == "edata" or p.meta.get("per_edge"))
    ]:
        users = [u for u in p.users if u is not moved]
        if users:
            with g.inserting_after(anchor):
                ordered = new_node(g, p, ops.edges_to, (moved, p))
            for user in users:
                user.replace_input_with(p, ordered)
    for back in [n for n in g.nodes if is_call(n, ops.edges_from) and n.args[0] in _inherited(g)]:
        if back.args[0] is moved:
            back.replace_all_uses_with(back.args[1])
            g.erase_node(back)
            continue
        with g.inserting_after(back):
            ordered = new_node(g, back, ops.edges_to, (moved, back))
        back.replace_all_uses_with(ordered, delete_user_cb=lambda u: u is not ordered)
    results = dict(out.outputs)
    for key, n in results.items():
        if isinstance(n, fx.Node) and n.meta.get("res") == "E":
            with g.inserting_before(out.output_node):
                results[key] = new_node(g, n, ops.edges_from, (moved, n))
    out.output_node.args = (results,)


def _convert(out: MPDFG, moved: fx.Node, lookups) -> None:
    g = out.graph
    for n, table, _ in lookups:
        with g.inserting_before(n):
            rows = new_node(g, n, ops.type_rows, (moved, table))
            if is_call(n, ops.index_gather_matmul):
                x, side = n.args[1], n.args[4]
                side = "dst" if side == "dst_local" else side
                rank = len(table.meta["shape"])
                if rank == 3:
                    new = new_node(g, n, ops.etype_gather_matmul, (moved, x, rows, side))
                elif rank == 4 and len(x.meta.get("shape") or ()) == 3:
                    new = new_node(g, n, ops.etype_gather_head_matmul, (moved, x, rows, side))
                else:
                    new = new_node(g, n, ops.index_gather_matmul, (moved, x, table, n.args[3], side, n.args[5]))
            else:
                new = new_node(g, n, ops.gather_etype, (moved, rows))
        new.meta.update({k: n.meta[k] for k in ("shape", "dtype") if k in n.meta})
        lifted = next(iter(n.users), None) if len(n.users) == 1 else None
        squeezed = next(iter(lifted.users), None) if lifted is not None and len(lifted.users) == 1 else None
        if new.target is ops.etype_gather_matmul and unsqueezed_then_squeezed(squeezed) is n:
            squeezed.replace_all_uses_with(new)  # a relation-typed [E, M] as it is: later passes match it
            g.erase_node(squeezed)
            g.erase_node(lifted)
        n.replace_all_uses_with(new)
        g.erase_node(n)
        if not rows.users:
            g.erase_node(rows)
        out.log.append(
            f"retype: {n.meta.get('source')}: {type_feature_name(moved.args[1])} selects the table per edge: "
            f"read as the edge's relation of the block regrouped by it"
        )


def retype(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    moved = next((n for n in g.nodes if is_call(n, ops.retype)), None)
    if moved is not None:  # already moved: lookups of the feature in the new edge order
        _convert(out, moved, _lookups(g, lambda t: is_call(t, ops.edges_to) and t.args[1] is moved.args[1]))
        return rewrote(dfg, out)
    ctx = next(n for n in g.nodes if n.op == "placeholder" and n.meta["input"][0] == "ctx")
    inherited = _inherited(g)
    if not out.whole_graph or not ctx.users or _blocked(out, ctx):
        return rewrote(dfg, out)
    if inherited:  # an earlier apply_edges ran on a retyped block: so does this plan, reading its values as is
        _move(out, ctx, inherited[0])
        out.log.append(
            f"retype: the plan runs on the block an earlier apply_edges regrouped "
            f"({inherited[0].meta['input'][1].rsplit('.', 1)[0]!r} computed on it)"
        )
        return rewrote(dfg, out)
    lookups = _lookups(g, _type_feature)
    if not lookups:
        return rewrote(dfg, out)
    types = lookups[0][2]
    mine = [found for found in lookups if found[2] is types]
    if len({table.meta["shape"][0] for _, table, _ in mine}) != 1:
        return rewrote(dfg, out)  # tables of different lengths: negative types would name different rows
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    with g.inserting_after(placeholders[-1]):
        moved = new_node(g, types, ops.retype, (ctx, types, mine[0][1].meta["shape"][0], type_feature_name(types)))
    _move(out, ctx, moved)
    out.log.append(
        f"retype: the plan runs on the block regrouped by {type_feature_name(types)} (edge inputs and outputs "
        f"put in its edge order and back)"
    )
    _convert(out, moved, _lookups(g, lambda t: is_call(t, ops.edges_to) and t.args[1] is types))
    return rewrote(dfg, out)
