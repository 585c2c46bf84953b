"""Shared dot: a product with a shared tensor summed over the last dim becomes one matmul.

Pattern (``w`` shared, S; ``x`` graph data with feature dims [H..., F], F > 1,
H = prod(H...) <= ``MAX_HEADS``; ``w`` broadcasts to x's feature dims
without expanding x; the product has no other user):
    ``sum(x * w, -1[, keepdim])``  ->  ``shared_dot(x, w, keepdim)``
which runs as x[rows, H*F] @ blockdiag(w)[H*F, H]: no [rows, H, F] product
is written and no strided reduction runs (GAT-style attention scores).
"""
from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from ..ir import ops
from ..ir.mpdfg import MPDFG
from .dce import dce
from .nodes import new_node

MAX_HEADS = 32  # beyond this the block-diagonal matmul does more work than it saves


def shared_dot(dfg: MPDFG) -> MPDFG:
    out = dce(dfg)  # products whose other users are dead still qualify
    g = out.graph
    for total in [n for n in g.nodes if _last_dim_sum(n)]:
        product = total.args[0]
        operands = _shared_product(product)
        if operands is None:
            continue
        x, w = operands
        with g.inserting_before(total):
            new = new_node(g, total, ops.shared_dot, (x, w, _keepdim(total)))
        total.replace_all_uses_with(new)
        out.log.append(f"shared_dot: {total.meta.get('source')}: product with a shared tensor + sum -> one matmul")
    return out


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
    """(x, w) when ``product`` is x * w with w shared and x graph data it does not expand; else None."""
    is_mul = ((product.op == "call_function" and product.target in (operator.mul, torch.mul))
              or (product.op == "call_method" and product.target == "mul"))
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
        feat = tuple(x_shape[1:])
        if len(w_shape) > len(feat) or feat[-1] < 2 or math.prod(feat[:-1]) > MAX_HEADS:
            continue
        try:
            if tuple(torch.broadcast_shapes(feat, tuple(w_shape))) == feat:
                return x, w
        except RuntimeError:
            continue
    return None
