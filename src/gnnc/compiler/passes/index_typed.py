"""Typed linear layers whose types are an integer feature (Hector's typed linear, types from data).

Pattern: ``W[t]`` (``getitem``, or ``index_select(0, t)``) where ``W`` is a shared ``[T, *B, K, M]``
float tensor (``B``: head dims, as HGT's ``relation_att[etype]``) — a
parameter, a closure tensor or one computed in ``forward`` (e.g. a basis
decomposition ``matmul(w_comp, V).view(T, K, M)``) — and
``t`` an integer (int64 / int32) ``[rows]`` feature of edges
(``edges.data['rel_type']``, or a tensor of the user's with one entry per
edge id, as DGL 0.5's RelGraphConv passes them) or nodes
(``nodes.data['type']``), used as
the per-row weight of

- ``squeeze(mm(unsqueeze(x_e, -2), W[t]), -2)`` with ``mm`` one of ``bmm``,
  ``matmul``, ``@`` (functions or methods), the unsqueeze and squeeze dims
  -2 or the same dim counted from the front (1 without heads), the squeeze
  a method or ``torch.squeeze``; or
- ``einsum('bi,bio->bo', x_e, W[t])`` (any three distinct letters, no heads);

where ``x_e`` is ``[rows, *B, K]``: ``gather_src(x)`` / ``gather_dst(x)`` /
``gather_dst_local(x)`` (also with the unsqueeze moved before the gather,
as ``reorder`` leaves it), or rows of ``t``'s own residency (edge data on
edges, node rows in a node UDF).

Replacement: ``index_gather_matmul(ctx, x, W, t, side, feature)`` for a
gathered ``x_e`` (one matmul per type over rows gathered on the fly) and
``index_matmul(x_e, W, t, feature)`` otherwise; rows are grouped by ``t``
at run time with a cached stable sort, and no ``[E, K, M]`` weight copy is
made, forward or backward (weight gradients are summed per type).
``squeeze()`` without a dim is matched too and replaced by the typed matmul
followed by ``.unsqueeze(-2).squeeze()`` (views), which squeezes every
size-one dim exactly as eager's squeeze of ``[rows, *B, 1, M]`` does.
"""

from __future__ import annotations

import operator
import re

import torch
import torch.fx as fx

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node, same_value
from .patterns import INDEX_DTYPES, table_lookup, type_feature_name

_MATMUL_FUNCTIONS = {torch.bmm, torch.matmul, operator.matmul}
_MATMUL_METHODS = {"bmm", "matmul", "__matmul__"}
_GATHERS = {ops.gather_src: "src", ops.gather_dst: "dst", ops.gather_dst_local: "dst_local"}
_EINSUM = re.compile(r"^\s*(\w)(\w)\s*,\s*(\w)(\w)(\w)\s*->\s*(\w)(\w)\s*$")


def _is(n, name: str, fn=None) -> bool:
    return isinstance(n, fx.Node) and (
        (n.op == "call_method" and n.target == name) or (fn is not None and n.op == "call_function" and n.target is fn)
    )


def _dim_arg(n: fx.Node, default="absent"):
    if len(n.args) > 1:
        return n.args[1]
    return n.kwargs.get("dim", default)


def _lookup(w):
    """(W, t) when ``w`` is ``W[t]`` with W a shared [T, *B, K, M] float tensor and t a 1-D integer feature."""
    found = table_lookup(w)
    if found is None:
        return None
    table, types = found
    shape, dtype = table.meta.get("shape"), table.meta.get("dtype")
    if table.meta.get("res") != "S" or shape is None or len(shape) < 3 or dtype is None or not dtype.is_floating_point:
        return None
    if (
        types.meta.get("res") not in ("E", "V")
        or len(types.meta.get("shape") or ()) != 1
        or types.meta.get("dtype") not in INDEX_DTYPES
    ):
        return None
    return table, types


def _row_unsqueeze(n):
    """x when ``n`` is x.unsqueeze(-2) (or the same dim from the front, or torch.unsqueeze) of x [rows, *B, K]."""
    if _is(n, "unsqueeze", torch.unsqueeze):
        x = n.args[0]
        rank = len(x.meta.get("shape") or ()) if isinstance(x, fx.Node) else 0
        if rank >= 2 and _dim_arg(n) in (rank - 1, -2):
            return x
    return None


def _rows(n):
    """(x, side, ctx) for [rows, 1, K] operand ``n`` of the matmul: side None means x are the rows."""
    row = _row_unsqueeze(n)
    if row is not None:
        return _source(row)
    if isinstance(n, fx.Node) and n.op == "call_function" and n.target in _GATHERS:
        inner = _row_unsqueeze(n.args[1])  # gather(x.unsqueeze(1)), as reorder leaves it
        if inner is not None:
            return inner, _GATHERS[n.target], n.args[0]
    return None


def _source(rows):
    if rows.op == "call_function" and rows.target in _GATHERS:
        return rows.args[1], _GATHERS[rows.target], rows.args[0]
    return rows, None, None


def _match_squeeze(sq):
    """(matmul-like node, [rows, *B, 1, K] operand, W[t] node, squeeze without a dim?) when ``sq`` squeezes
    the matmul's dim -2 (or that dim from the front, or every size-one dim)."""
    if not _is(sq, "squeeze", torch.squeeze):
        return None
    dim = _dim_arg(sq, None)
    rank = len(sq.args[0].meta.get("shape") or ()) if isinstance(sq.args[0], fx.Node) else 0
    if rank < 3 or dim not in (rank - 2, -2, None) or (dim is None and sq.op != "call_method"):
        return None
    mm = sq.args[0]
    if not isinstance(mm, fx.Node) or len(mm.users) != 1 or mm.kwargs or len(mm.args) != 2:
        return None
    if not (
        (mm.op == "call_function" and mm.target in _MATMUL_FUNCTIONS)
        or (mm.op == "call_method" and mm.target in _MATMUL_METHODS)
    ):
        return None
    if rank != 3 and mm.target in (torch.bmm, "bmm"):  # eager's bmm takes 3-D operands only
        return None
    return mm, mm.args[0], mm.args[1], dim is None


def _match_einsum(n):
    if not (isinstance(n, fx.Node) and n.op == "call_function" and n.target is torch.einsum and not n.kwargs):
        return None
    args = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (tuple, list)) else n.args[1:]
    if len(args) != 2 or not isinstance(n.args[0], str):
        return None
    m = _EINSUM.match(n.args[0])
    if m is None:
        return None
    b, i, b2, i2, o, b3, o3 = m.groups()
    if not (b == b2 == b3 and i == i2 and o == o3 and len({b, i, o}) == 3):
        return None
    x = args[0]
    if not isinstance(x, fx.Node) or len(x.meta.get("shape") or ()) != 2:
        return None
    return x, args[1]


def _plan(rows_info, lookup):
    """(x, side, ctx) if the operands make a typed matmul this pass can lower, else None."""
    if rows_info is None or lookup is None:
        return None
    x, side, ctx = rows_info
    table, types = lookup
    shape = tuple(x.meta.get("shape") or ())
    if x.meta.get("dtype") != table.meta["dtype"] or len(shape) < 2 or shape[1:] != tuple(table.meta["shape"][1:-1]):
        return None
    if side is not None:
        if types.meta.get("res") != "E":
            return None
    elif x.meta.get("res") != types.meta.get("res"):
        return None
    return x, side, ctx


def index_typed(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    for n in list(g.nodes):
        if n.op not in ("call_function", "call_method"):  # (a matched node's operands come before it)
            continue
        squeezed = _match_squeeze(n)
        if squeezed is not None:
            mm, left, w, keep_dims = squeezed
            rows_info, dead = _rows(left), [n, mm]
        else:
            found = _match_einsum(n)
            if found is None:
                continue
            x, w = found
            rows_info, keep_dims, dead = _source(x), False, [n]
        lookup = _lookup(w)
        plan = _plan(rows_info, lookup)
        if plan is None:
            continue
        x, side, ctx = plan
        table, types = lookup
        feature = f"{type_feature_name(types)} (indexing a weight at {w.meta.get('source', '?')})"
        with g.inserting_before(n):
            if side is None:
                typed = new_node(g, n, ops.index_matmul, (x, table, types, feature))
            else:
                typed = new_node(g, n, ops.index_gather_matmul, (ctx, x, table, types, side, feature))
            rows = (x.meta["shape"][0],) if side is None else (n.meta.get("shape") or (None,))[:1]
            typed.meta.update(
                shape=rows + tuple(table.meta["shape"][1:-2]) + (table.meta["shape"][-1],), dtype=table.meta["dtype"]
            )
            replacement = typed
            if keep_dims:  # eager's squeeze() of [rows, *B, 1, M]: drops every size-one dim
                lifted = new_node(g, n, "unsqueeze", (typed, -2), op="call_method")
                replacement = same_value(new_node(g, n, "squeeze", (lifted,), op="call_method"), n)
        n.replace_all_uses_with(replacement)
        for d in dead:
            g.erase_node(d)
        how = "per-type matmul over gathered rows" if side is not None else "per-type matmul over its rows"
        out.log.append(
            f"index_typed: {n.meta.get('source')}: {type_feature_name(types)} selects the weight per "
            f"{'edge' if types.meta.get('res') == 'E' else 'node'}: {how}, grouped at run time "
            f"(no per-row weight copies)"
        )
    return rewrote(dfg, out)
