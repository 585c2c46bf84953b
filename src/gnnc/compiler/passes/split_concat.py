"""Concat split: a linear map of a concatenation becomes a sum of linear maps.

Patterns (``c = cat([a, b], -1)``, ``W`` shared):
- ``sum(c * w, -1)``  ->  ``sum(a * w[..., :Fa], -1) + sum(b * w[..., Fa:], -1)`` for shared ``w``
  or ``w`` of any residency whose last dim is c's (RGAT's per-relation
  attention vectors, gathered to edges)
- ``c @ W``           ->  ``a @ W[:Fa] + b @ W[Fa:]``
- ``linear(c)`` (an ``nn.Linear`` module) -> ``F.linear(a, W[:, :Fa]) + F.linear(b, W[:, Fa:], bias)``
Each half can then be reordered to run per node (GAT attention, GCNN,
EdgeConv's ``[x_v || x_u - x_v]``). Applied only when the concatenation has
no other user.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node
from .patterns import is_last_dim_sum


def _is_last_dim_cat(n) -> bool:
    if not (isinstance(n, fx.Node) and n.op == "call_function" and n.target is torch.cat):
        return False
    dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else 0)
    parts = n.args[0]
    shape = n.meta.get("shape")
    return (
        isinstance(parts, (list, tuple))
        and len(parts) == 2
        and shape is not None
        and dim in (-1, len(shape) - 1)
        and all(isinstance(p, fx.Node) and p.meta.get("shape") for p in parts)
    )


def split_concat(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    for cat in [n for n in g.nodes if _is_last_dim_cat(n)]:
        if len(cat.users) != 1:
            continue
        user = next(iter(cat.users))
        a, b = cat.args[0]
        fa = a.meta["shape"][-1]
        with g.inserting_before(user):
            result = _split_user(g, out.root, user, cat, a, b, fa)
        if result is None:
            continue
        replaced, new = result
        replaced.replace_all_uses_with(new)
        out.log.append(f"split_concat: {cat.meta.get('source')}: linear map of a concatenation split in two")
    return rewrote(dfg, out)


def _split_user(g, root, user, cat, a, b, fa):
    if user.op == "call_function" and user.target in (operator.mul, torch.mul):
        w = user.args[1] if user.args[0] is cat else user.args[0]
        if not (isinstance(w, fx.Node) and len(user.users) == 1 and _slices_along(w, cat)):
            return None
        total = next(iter(user.users))
        if not is_last_dim_sum(total):
            return None
        kw = dict(total.kwargs)
        w_a = new_node(g, user, operator.getitem, (w, (Ellipsis, slice(None, fa))))
        w_b = new_node(g, user, operator.getitem, (w, (Ellipsis, slice(fa, None))))
        halves = []
        for part, wp in ((a, w_a), (b, w_b)):
            prod = new_node(g, user, operator.mul, (part, wp))
            rest = {k: v for k, v in kw.items() if k != "dim"}
            halves.append(new_node(g, total, total.target, (prod, -1), op=total.op, kwargs=rest))
        return total, new_node(g, total, operator.add, tuple(halves))
    if user.op == "call_function" and user.target in (operator.matmul, torch.matmul) and user.args[0] is cat:
        w = user.args[1]
        if not (isinstance(w, fx.Node) and w.meta.get("res") == "S" and len(w.meta.get("shape", ())) == 2):
            return None
        w_a = new_node(g, user, operator.getitem, (w, slice(None, fa)))
        w_b = new_node(g, user, operator.getitem, (w, slice(fa, None)))
        left = new_node(g, user, operator.matmul, (a, w_a))
        right = new_node(g, user, operator.matmul, (b, w_b))
        return user, new_node(g, user, operator.add, (left, right))
    if user.op == "call_module" and isinstance(root.get_submodule(user.target), nn.Linear):
        weight = new_node(g, user, f"{user.target}.weight", (), op="get_attr")
        w_a = new_node(g, user, operator.getitem, (weight, (slice(None), slice(None, fa))))
        w_b = new_node(g, user, operator.getitem, (weight, (slice(None), slice(fa, None))))
        bias = None
        if root.get_submodule(user.target).bias is not None:
            bias = new_node(g, user, f"{user.target}.bias", (), op="get_attr")
        left = new_node(g, user, F.linear, (a, w_a))
        right = new_node(g, user, F.linear, (b, w_b, bias))
        return user, new_node(g, user, operator.add, (left, right))
    return None


def _slices_along(w: fx.Node, cat: fx.Node) -> bool:
    """Whether ``w[..., :Fa]`` / ``w[..., Fa:]`` are the parts multiplying ``a`` / ``b``: w has cat's full
    last dim (a size-1 dim would broadcast, not slice), whatever its residency."""
    w_shape, c_shape = w.meta.get("shape"), cat.meta.get("shape")
    return bool(w_shape and c_shape and w_shape[-1] == c_shape[-1] and len(w_shape) <= len(c_shape))
