"""Per-head dot products with shared weight rows (GAT's attention scores) as Triton kernels.

Contract: ``gnnc.backend.pytorch.head_dot``: out[r, h, j] = sum_f x[r, h, f] * w[j, h, f].
Forward: one program per block of rows and weight row j. Backward: grad_x
per block of rows (a sum over the K weight rows); grad_w as per-block
partial sums over rows, added up by one torch sum (deterministic, no atomics).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import Function

from ..pytorch.first_order import first_order
from ..pytorch.head_dot import check_head_dot
from .launch import check_device, head_tile, kernel

# features per chunk of the loops over a head's features
FEATURE_CHUNK = 64


def _forward(x, w, out, num_rows, heads, feats, num_weights, BR: tl.constexpr, BH: tl.constexpr, BF: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    j = tl.program_id(1)
    h = tl.arange(0, BH)
    rh_ok = (rows < num_rows)[:, None] & (h < heads)[None, :]
    total = tl.zeros([BR, BH], dtype=out.dtype.element_ty)
    for f0 in range(0, feats, BF):
        f = f0 + tl.arange(0, BF)
        f_ok = (f < feats)[None, None, :]
        xv = tl.load(
            x + (rows[:, None] * heads + h[None, :])[:, :, None] * feats + f[None, None, :],
            mask=rh_ok[:, :, None] & f_ok,
            other=0.0,
        )
        wv = tl.load(
            w + (j * heads + h)[None, :, None] * feats + f[None, None, :],
            mask=(h < heads)[None, :, None] & f_ok,
            other=0.0,
        )
        total += tl.sum(xv * wv, axis=2)
    tl.store(out + (rows[:, None] * heads + h[None, :]) * num_weights + j, total, mask=rh_ok)


def _backward(
    x,
    w,
    grad,
    grad_x,
    partial_w,
    num_rows,
    heads,
    feats,
    num_weights,
    WITH_X: tl.constexpr,
    WITH_W: tl.constexpr,
    BR: tl.constexpr,
    BH: tl.constexpr,
    BF: tl.constexpr,
):
    """grad_x[r, h, f] = sum_j g[r, h, j] w[j, h, f] for this program's rows and feature chunk, and
    partial_w[block, j, h, f] = sum over its rows of g[r, h, j] x[r, h, f]."""
    block = tl.program_id(0)
    rows = block * BR + tl.arange(0, BR)
    f = tl.program_id(1) * BF + tl.arange(0, BF)
    h = tl.arange(0, BH)
    rh_ok = (rows < num_rows)[:, None] & (h < heads)[None, :]
    hf_ok = (h < heads)[:, None] & (f < feats)[None, :]
    node = rows[:, None] * heads + h[None, :]
    ok = rh_ok[:, :, None] & (f < feats)[None, None, :]
    if WITH_W:
        xv = tl.load(x + node[:, :, None] * feats + f[None, None, :], mask=ok, other=0.0)
    acc = tl.zeros([BR, BH, BF], dtype=grad.dtype.element_ty)
    for j in range(0, num_weights):
        g = tl.load(grad + node * num_weights + j, mask=rh_ok, other=0.0)[:, :, None]
        if WITH_X:
            acc += g * tl.load(w + (j * heads + h[:, None]) * feats + f[None, :], mask=hf_ok, other=0.0)[None, :, :]
        if WITH_W:
            tl.store(
                partial_w + ((block * num_weights + j) * heads + h[:, None]) * feats + f[None, :],
                tl.sum(g * xv, axis=0),
                mask=hf_ok,
            )
    if WITH_X:
        tl.store(grad_x + node[:, :, None] * feats + f[None, None, :], acc, mask=ok)


FORWARD = kernel(_forward)
BACKWARD = kernel(_backward)


def head_dot(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """out[r, h, j] = sum_f x[r, h, f] * weights[j, h, f] (see ``gnnc.backend.pytorch.head_dot``)."""
    check_head_dot(x, weights)
    check_device(x.device)
    return _HeadDot.apply(x, weights)


def _tile(heads: int, feats: int) -> tuple[int, int, int]:
    return head_tile(heads, min(feats, FEATURE_CHUNK))


class _HeadDot(Function):
    @staticmethod
    def forward(ctx, x, weights):
        rows, heads, feats = x.shape
        num_weights = weights.shape[0]
        out = x.new_zeros(rows, heads, num_weights)
        if out.numel() and feats:
            br, bh, bf = _tile(heads, feats)
            FORWARD[(triton.cdiv(rows, br), num_weights)](
                x.contiguous(), weights.contiguous(), out, rows, heads, feats, num_weights, BR=br, BH=bh, BF=bf
            )
        ctx.save_for_backward(x, weights)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, weights = ctx.saved_tensors
        rows, heads, feats = x.shape
        num_weights = weights.shape[0]
        with_x, with_w = ctx.needs_input_grad[:2]
        grad_x = torch.zeros_like(x) if with_x else None
        grad_w = torch.zeros_like(weights) if with_w else None
        if rows and heads and feats and num_weights:
            br, bh, bf = _tile(heads, feats)
            blocks = triton.cdiv(rows, br)
            partial = x.new_empty(blocks, num_weights, heads, feats) if with_w else x
            x_rows = x.contiguous()
            BACKWARD[(blocks, triton.cdiv(feats, bf))](
                x_rows,
                weights.contiguous(),
                grad.contiguous(),
                x_rows if grad_x is None else grad_x,
                partial,
                rows,
                heads,
                feats,
                num_weights,
                WITH_X=with_x,
                WITH_W=with_w,
                BR=br,
                BH=bh,
                BF=bf,
            )
            if with_w:
                grad_w = partial.sum(0)
        return grad_x, grad_w
