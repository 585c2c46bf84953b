"""Distribution: a linear map of a sum or difference of edge data becomes the sum of the linear maps.

Patterns (``s = p + q`` or ``p - q``, edge data (E), at least one of p, q a
broadcast — ``gather_src``, ``gather_dst``, ``gather_dst_local``; ``W``, ``b``
shared; ``s`` has no other user):
- ``linear(s)`` (an ``nn.Linear`` module) -> ``F.linear(p, W, b) ± F.linear(q, W)``
- ``F.linear(s, W[, b])``                 -> ``F.linear(p, W[, b]) ± F.linear(q, W)``
- ``s @ W``                               -> ``p @ W ± q @ W``
Linear maps distribute over addition, so this is exact up to rounding; it
lets ``reorder`` run each half once per node and broadcast it, instead of
the map running once per edge (EdgeConv's ``W (x_u - x_v)``).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .dce import dce
from .nodes import new_node

_SIGNS = {operator.add: operator.add, torch.add: operator.add, operator.sub: operator.sub, torch.sub: operator.sub}
_BROADCASTS = (ops.gather_src, ops.gather_dst, ops.gather_dst_local)


def _split_sum(n):
    """(p, q, add or sub) when ``n`` is an edge-data p ± q with a broadcast operand, else None."""
    if not (
        isinstance(n, fx.Node)
        and n.op == "call_function"
        and n.target in _SIGNS
        and len(n.args) == 2
        and not n.kwargs
        and n.meta.get("res") == "E"
        and len(n.users) == 1
    ):
        return None
    p, q = n.args
    if not all(isinstance(t, fx.Node) and t.meta.get("shape") == n.meta.get("shape") for t in (p, q)):
        return None  # a broadcasting sum would change each term's shape under the map
    if not any(t.op == "call_function" and t.target in _BROADCASTS for t in (p, q)):
        return None
    return p, q, _SIGNS[n.target]


def _linear_parts(g, root, user, total):
    """(weight, bias, how to apply) of a linear ``user`` of ``total``, or None."""
    if (
        user.op == "call_module"
        and isinstance(root.get_submodule(user.target), nn.Linear)
        and len(user.args) == 1
        and not user.kwargs
    ):
        weight = new_node(g, user, f"{user.target}.weight", (), op="get_attr")
        bias = (
            new_node(g, user, f"{user.target}.bias", (), op="get_attr")
            if root.get_submodule(user.target).bias is not None
            else None
        )
        return weight, bias, F.linear
    if user.op == "call_function" and user.target is F.linear and user.args[0] is total and not user.kwargs:
        weight = user.args[1]
        bias = user.args[2] if len(user.args) > 2 else None
        if all(t is None or (isinstance(t, fx.Node) and t.meta.get("res") == "S") for t in (weight, bias)):
            return weight, bias, F.linear
    if (
        user.op == "call_function"
        and user.target in (operator.matmul, torch.matmul)
        and len(user.args) == 2
        and user.args[0] is total
        and not user.kwargs
    ):
        weight = user.args[1]
        if isinstance(weight, fx.Node) and weight.meta.get("res") == "S":
            return weight, None, operator.matmul
    return None


def distribute(dfg: MPDFG) -> PassResult:
    out = dce(dfg).dfg  # sums whose other users are dead (a split concatenation) still qualify
    g = out.graph
    for total in list(g.nodes):
        split = _split_sum(total)
        if split is None:
            continue
        p, q, sign = split
        user = next(iter(total.users))
        with g.inserting_before(user):
            parts = _linear_parts(g, out.root, user, total)
            if parts is None:
                continue
            weight, bias, apply = parts
            left = new_node(g, user, apply, (p, weight) + ((bias,) if bias is not None else ()))
            right = new_node(g, user, apply, (q, weight))
            new = new_node(g, user, sign, (left, right))
        user.replace_all_uses_with(new)
        out.log.append(f"distribute: {user.meta.get('source')}: linear map of a sum split per term")
    return rewrote(dfg, out)
