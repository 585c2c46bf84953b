"""What the fusion rules share: the gathers they fuse, and the dtype a fused kernel computes in.

The fused kernels take floating operands of one dtype. Where torch's type promotion would compute the
unfused operator in another dtype than an operand's (a float feature times a bool mask, float32 times
float64), that operand is cast to it first (``x.to(dtype)``: exact, and on node rows before the
gather where it can); nothing is fused into a kernel whose result would not be floating point.
"""

from __future__ import annotations

import functools
import operator

import torch
import torch.fx as fx

from ....ir import operators as ops
from ..nodes import new_node

MULS = {operator.mul, torch.mul}

_SOURCE_SIDES = {ops.gather_src: "src", ops.gather_src_pair: "src_pair"}

DESTINATION_SIDES = {ops.gather_dst: "dst", ops.gather_dst_local: "dst_local", ops.gather_dst_pair: "dst_pair"}


def source_side(n) -> str | None:
    """``x_side`` of a fused operator reading what ``n`` gathers: src, src_pair, or None (not a source gather)."""
    return _SOURCE_SIDES.get(n.target) if isinstance(n, fx.Node) and n.op == "call_function" else None


def sddmm_slope(sddmm: fx.Node):
    """The negative slope applied inside a ``u_op_v`` node, or None."""
    return sddmm.args[5] if len(sddmm.args) > 5 else None


def float_dtype(n):
    """The dtype of node ``n``'s value when it is floating point (what a fused kernel can compute), else None."""
    dtype = n.meta.get("dtype") if isinstance(n, fx.Node) else None
    return dtype if dtype is not None and dtype.is_floating_point else None


def promoted(values):
    """The dtype torch's type promotion gives a product (or sum) of ``values``, nodes whose shape and dtype
    are known (zero-dim ones count as torch counts them); None when one is not known."""
    if any(v.meta.get("dtype") is None or v.meta.get("shape") is None for v in values):
        return None
    return functools.reduce(
        operator.mul, [torch.empty((0,) * len(v.meta["shape"]), dtype=v.meta["dtype"]) for v in values]
    ).dtype


def as_dtype(g, like, x, dtype):
    """``x``, or ``x.to(dtype)`` when its dtype is another: an operand as the unfused operator computes with it."""
    if x.meta.get("dtype") == dtype:
        return x
    cast = new_node(g, like, "to", (x, dtype), op="call_method")
    cast.meta.update({k: x.meta[k] for k in ("shape", "res") if k in x.meta}, dtype=dtype)
    return cast
