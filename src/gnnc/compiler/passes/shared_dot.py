"""Shared dot: products with shared tensors summed over the last dim become one matmul.

Pattern 1 (``w`` shared, S; ``x`` graph data with feature dims [H..., F], F > 1,
H = prod(H...) <= ``MAX_HEADS``; ``w`` broadcasts to x's feature dims
without expanding x, with at most a size-one dim facing x's rows (``attn_l``
of shape [1, H, F], as DGL's GATConv keeps it), dropped first; the product
has no other user):
    ``sum(x * w, -1[, keepdim])``  ->  ``shared_dot(x, w, keepdim)``
which runs as x[rows, H*F] @ blockdiag(w)[H*F, H]: no [rows, H, F] product
is written and no strided reduction runs (GAT-style attention scores).

Pattern 2 (k >= 2 of those on the same rows: each reads ``x`` or
``dst_nodes(ctx, x)`` of one ``x``, with weights of x's dtype defined before
the first of them, or shared values of parameters moved there):
    ``shared_dot(x_i, w_i, keepdim_i)``  ->  ``m = shared_dot(x, (w_1, ..., w_k), True)``
and each result becomes its column of ``m`` (``m[..., i]``, or
``m[..., i:i+1]`` with keepdim), under ``dst_nodes(ctx, .)`` when x_i is
``dst_nodes(ctx, x)`` and some other x_j is x itself (a row slice commutes with
a row-wise map). x is read once instead of k times (GAT's source and
destination halves). H is unchanged, so ``MAX_HEADS`` still bounds the
block-diagonal overhead: the merged matmul does the parts' work, no more.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from ...backend.pytorch.common import broadcast_shape
from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .dce import dce
from .nodes import new_node

MAX_HEADS = 32  # beyond this the block-diagonal matmul does more work than it saves


def shared_dot(dfg: MPDFG) -> PassResult:
    out = dce(dfg).dfg  # products whose other users are dead still qualify
    g = out.graph
    for total in [n for n in g.nodes if _last_dim_sum(n)]:
        product = total.args[0]
        operands = _shared_product(product)
        if operands is None:
            continue
        x, w, extra = operands
        if extra:  # [1, *w_feat] broadcast against the rows: the same weights for every row
            with g.inserting_after(w):
                w = new_node(g, total, "reshape", (w, tuple(w.meta["shape"][extra:])), op="call_method")
            w.meta.update(shape=tuple(w.args[0].meta["shape"][extra:]), dtype=w.args[0].meta["dtype"], res="S")
        with g.inserting_before(total):
            new = new_node(g, total, ops.shared_dot, (x, w, _keepdim(total)))
        total.replace_all_uses_with(new)
        out.log.append(f"shared_dot: {total.meta.get('source')}: product with a shared tensor + sum -> one matmul")
    for dots in _same_rows_groups(g):
        _merge(g, dots)
        out.log.append(
            f"shared_dot: {dots[0].meta.get('source')}: {len(dots)} products with shared tensors "
            "on the same rows -> one matmul"
        )
    return rewrote(dfg, out)


def _is_dst_rows(n) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target is ops.dst_nodes


def _base_rows(dot: fx.Node) -> fx.Node:
    """The node whose rows ``dot`` reads: x for ``x`` and for ``dst_nodes(ctx, x)``."""
    rows = dot.args[0]
    return rows.args[1] if _is_dst_rows(rows) else rows


def _weights(dot: fx.Node) -> tuple:
    w = dot.args[1]
    return tuple(w) if isinstance(w, (tuple, list)) else (w,)


def _same_rows_groups(g: fx.Graph) -> list:
    """shared_dot nodes, in graph order, grouped by the rows they read; groups of two or more.

    A dot joins its group when its weights have x's dtype and are defined
    before the group's first dot (where the merged matmul goes), or can be
    moved there (``_movable``).
    """
    order = {n: i for i, n in enumerate(g.nodes)}
    groups: dict = {}
    for dot in [n for n in g.nodes if n.op == "call_function" and n.target is ops.shared_dot]:
        x = _base_rows(dot)
        group = groups.setdefault(x, [])
        first = group[0] if group else dot
        if all(
            isinstance(w, fx.Node) and w.meta.get("dtype") == x.meta.get("dtype") and _movable(w, order[first], order)
            for w in _weights(dot)
        ):
            group.append(dot)
    return [dots for dots in groups.values() if len(dots) > 1]


def _movable(w: fx.Node, position: int, order: dict) -> bool:
    """``w`` is defined before ``position``, or is a shared value computed from such values and parameters
    only, by out-of-place operations (``self.attn_r`` read after the first dot)."""
    if order[w] < position:
        return True
    if w.meta.get("res") != "S" or w.op not in ("get_attr", "call_function", "call_method"):
        return False
    if w.op != "get_attr" and str(getattr(w.target, "__name__", w.target)).endswith("_"):
        return False
    return all(_movable(a, position, order) for a in w.all_input_nodes)


def _move_before(w: fx.Node, first: fx.Node, done: set) -> None:
    """Put ``w`` (``_movable``) and what it reads before ``first``."""
    if w in done:
        return
    done.add(w)
    for a in w.all_input_nodes:
        _move_before(a, first, done)
    first.prepend(w)


def _merge(g: fx.Graph, dots: list) -> None:
    """One shared_dot over all of ``dots``' weights; each dot's uses read its columns of it."""
    all_dst = all(_is_dst_rows(d.args[0]) for d in dots)
    rows = dots[0].args[0] if all_dst else _base_rows(dots[0])
    weights = tuple(w for d in dots for w in _weights(d))
    order = {n: i for i, n in enumerate(g.nodes)}
    done = {n for n in g.nodes if order[n] < order[dots[0]]}
    for w in weights:
        _move_before(w, dots[0], done)
    with g.inserting_before(dots[0]):
        merged = new_node(g, dots[0], ops.shared_dot, (rows, weights, True))
    lo = 0
    for dot in dots:
        k = len(_weights(dot))
        with g.inserting_before(dot):
            part = new_node(g, dot, operator.getitem, (merged, (Ellipsis, slice(lo, lo + k) if dot.args[2] else lo)))
            if _is_dst_rows(dot.args[0]) and not all_dst:
                part = new_node(g, dot, ops.dst_nodes, (dot.args[0].args[0], part))
        dot.replace_all_uses_with(part)
        lo += k


def _last_dim_sum(n: fx.Node) -> bool:
    is_sum = (n.op == "call_method" and n.target == "sum") or (n.op == "call_function" and n.target is torch.sum)
    if not (is_sum and n.args and isinstance(n.args[0], fx.Node)):
        return False
    dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
    rank = len(n.args[0].meta.get("shape") or ())
    extra = set(n.kwargs) - {"dim", "keepdim"}
    return not extra and len(n.args) <= 2 and rank >= 2 and dim in (-1, rank - 1)


def _keepdim(n: fx.Node) -> bool:
    return bool(n.kwargs.get("keepdim", False))


def _shared_product(product: fx.Node):
    """(x, w, k) when ``product`` is x * w with w shared and x graph data it does not expand; k = 1 when w
    has x's rank, its first dim a size-one dim facing x's rows, else 0; None otherwise."""
    is_mul = (product.op == "call_function" and product.target in (operator.mul, torch.mul)) or (
        product.op == "call_method" and product.target == "mul"
    )
    if not (is_mul and len(product.args) == 2 and not product.kwargs and len(product.users) == 1):
        return None
    a, b = product.args
    for x, w in ((a, b), (b, a)):
        if not (isinstance(x, fx.Node) and isinstance(w, fx.Node)):
            continue
        if w.meta.get("res") != "S" or x.meta.get("res") in (None, "S"):
            continue
        x_shape, w_shape = x.meta.get("shape"), w.meta.get("shape")
        if x_shape is None or w_shape is None or x.meta.get("dtype") != w.meta.get("dtype"):
            continue
        feat, extra = tuple(x_shape[1:]), max(0, len(w_shape) - len(x_shape) + 1)
        if (
            len(w_shape) > len(x_shape)
            or any(d != 1 for d in w_shape[:extra])
            or feat[-1] < 2
            or math.prod(feat[:-1]) > MAX_HEADS
        ):
            continue
        try:
            if tuple(broadcast_shape(feat, tuple(w_shape[extra:]))) == feat:
                return x, w, extra
        except ValueError:
            continue
    return None
