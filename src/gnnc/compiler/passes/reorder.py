"""Broadcast reordering (Graphiler 4.3.1) / propagation postponement (computational-graph study).

Pattern: a Dense, deterministic operator ``f`` whose graph-data inputs are
all broadcasts from the same side of the edges — ``gather_src`` of node data
or ``gather_srctype`` of node-type data (source side), ``gather_dst`` /
``gather_dsttype`` / ``gather_dst_local`` (destination side), or only
``gather_etype`` / only type gathers, or ``gather_src_pair`` (``gather_dst_pair``) of
(relation, node) pair rows with any ``gather_etype`` (a pair's relation is
known) — with any shared inputs.
Replacement: ``gather(f(x...))``: ``f`` runs once per node (or per type)
and its result is broadcast. A row-wise ``f`` commutes with a row gather,
so this is exact; it is applied when the rows before the gather are no
more numerous than after (|V| <= |E|, always for type data). Random
operators (dropout) are never moved: a mask per edge is not a mask per node.
"""

from __future__ import annotations

import torch.fx as fx

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .patterns import is_random

# gather -> (side, how to express its input at the side's node level)
_SIDES = {
    ops.gather_src: "src",
    ops.gather_srctype: "src",
    ops.gather_dst: "dst",
    ops.gather_dsttype: "dst",
    ops.gather_dst_local: "dst",
    ops.gather_etype: "etype",
    ops.gather_src_pair: "src_pair",
    ops.gather_dst_pair: "dst_pair",
}
_PAIR_GATHERS = {"src_pair": ops.gather_src_pair, "dst_pair": ops.gather_dst_pair}
_TYPE_GATHERS = {ops.gather_srctype: "srctype", ops.gather_dsttype: "dsttype"}


def _gather_kind(n):
    return n.target if isinstance(n, fx.Node) and n.op == "call_function" and n.target in _SIDES else None


def _depends_on_graph_data(n: fx.Node, memo: dict) -> bool:
    """True when a shared-looking value (e.g. x.shape[0]) is computed from graph data."""
    if n in memo:
        return memo[n]
    res = n.meta.get("res")
    memo[n] = (res not in (None, "S")) or any(
        _depends_on_graph_data(a, memo) for a in n.all_input_nodes if a.meta.get("input", (None,))[0] != "ctx"
    )
    return memo[n]


def reorder(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g, memo = out.graph, {}
    for n in list(g.nodes):
        if (
            n.op not in ("call_function", "call_method", "call_module")
            or n.meta.get("move") != "Dense"
            or not n.users
            or "shape" not in n.meta
        ):  # no tensor (x.dtype, x.shape): no rows to gather
            continue
        if n.op == "call_function" and n.target in ops.__dict__.values():
            continue
        if is_random(n, out.root):
            continue
        inputs = [a for a in n.all_input_nodes if a.meta.get("input", (None,))[0] != "ctx"]
        gathers = [a for a in inputs if _gather_kind(a)]
        others = [a for a in inputs if not _gather_kind(a)]
        if not gathers or any(a.meta.get("res") != "S" or _depends_on_graph_data(a, memo) for a in others):
            continue
        kinds = {a.target for a in gathers}
        sides = {_SIDES[k] for k in kinds}
        if len(sides) == 2 and "etype" in sides and sides & set(_PAIR_GATHERS):
            sides.discard("etype")  # relation rows are expressed per pair
        if len(sides) != 1 or not _worth_it(gathers):
            continue
        side = sides.pop()
        ctx = gathers[0].args[0]
        with g.inserting_before(n):
            node_level, gather_fn = _node_level_inputs(g, n, ctx, gathers, kinds, side)
            moved = g.node_copy(n, lambda a: node_level.get(a, a))
            moved.meta = {"stage": n.meta.get("stage"), "source": n.meta.get("source"), "move": "Dense"}
            regathered = g.call_function(gather_fn, (ctx, moved))
            regathered.meta = {"stage": n.meta.get("stage"), "source": n.meta.get("source")}
        n.replace_all_uses_with(regathered)
        g.erase_node(n)
        out.log.append(
            f"reorder: {_label(n)} ({n.meta.get('source')}) now runs per {_level(gather_fn)}, then {gather_fn.__name__}"
        )
    return rewrote(dfg, out)


def _node_level_inputs(g, n, ctx, gathers, kinds, side):
    """Map each gather to its pre-gather value at one common level; return (map, gather to apply)."""
    if kinds <= set(_TYPE_GATHERS) and len(kinds) == 1:
        return {a: a.args[1] for a in gathers}, next(iter(kinds))
    if side == "etype":
        return {a: a.args[1] for a in gathers}, ops.gather_etype
    if side in _PAIR_GATHERS:
        pair_side = side.removesuffix("_pair")
        return {
            a: a.args[1]
            if a.target is _PAIR_GATHERS[side]
            else _call(g, ops.pair_etype_rows, ctx, a.args[1], n, pair_side)
            for a in gathers
        }, _PAIR_GATHERS[side]
    mapping = {}
    for a in gathers:
        x = a.args[1]
        if side == "src":
            mapping[a] = x if a.target is ops.gather_src else _call(g, ops.node_type_rows, ctx, x, n)
        elif a.target is ops.gather_dst_local:
            mapping[a] = x
        elif a.target is ops.gather_dst:
            mapping[a] = _call(g, ops.dst_nodes, ctx, x, n)
        else:
            mapping[a] = _call(g, ops.gather_ntype, ctx, x, n)
    return mapping, (ops.gather_src if side == "src" else ops.gather_dst_local)


def _call(g, fn, ctx, x, like, *extra):
    node = g.call_function(fn, (ctx, x) + extra)
    node.meta = {"stage": like.meta.get("stage"), "source": like.meta.get("source")}
    return node


def _worth_it(gathers) -> bool:
    for a in gathers:
        before, after = a.args[1].meta.get("shape"), a.meta.get("shape")
        if before and after and before[0] > after[0] and a.target in (ops.gather_src, ops.gather_dst):
            return False
    return True


def _level(gather_fn) -> str:
    if gather_fn in _TYPE_GATHERS or gather_fn is ops.gather_etype:
        return "type"
    return "(relation, node) pair" if gather_fn in _PAIR_GATHERS.values() else "node"


def _label(n) -> str:
    return (
        f"Tensor.{n.target}"
        if n.op == "call_method"
        else (n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target)))
    )
