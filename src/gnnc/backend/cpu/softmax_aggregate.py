"""Fused vertex-balanced edge softmax + weighted aggregation (numba, CPU).

Forward: a loop over destinations (CSR by destination) takes each
destination's max logit and writes the shifted logits in CSR order; torch
exponentiates them in one vectorized pass ([E, H], the logits' size); a
second loop over destinations sums them and the weighted source rows and
normalizes, so the [E, H, F] messages never exist. Backward recomputes
alpha from the saved per-destination max and denominator (one shift pass +
exp, in edge order); the logit gradient loops over destinations, the
feature gradient over sources (CSR by source), so no loop needs atomics.
Same contract as ``gnnc.backend.torch.edge_softmax_aggregate``.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import prange
from torch.autograd.function import Function, once_differentiable

from ..torch.common import as_heads, broadcast_shape, head_layout, heads_to_weight, sum_to, weight_as_heads
from ..torch.csr import csr_structure
from ..torch.softmax import check_softmax_aggregate
from .interop import as_array, launch, specialized
from .prefetch import prefetch_row

# How many edges ahead the gathers of feature rows ask for them (logit rows are too narrow to gain).
AHEAD = 8


def edge_softmax_aggregate(logits: torch.Tensor, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                           num_dst: int, *, chunk: int | None = None) -> torch.Tensor:
    """out[v] = sum over e with dst[e] == v of edge_softmax(logits)[e] * x[src[e]].

    Shapes and broadcasting as in the torch backend; ``chunk`` is accepted
    for signature compatibility and ignored (no edge chunks exist here).
    """
    logits, num_dst = check_softmax_aggregate(logits, x, src, dst, num_dst)
    if x.device.type != "cpu":
        raise ValueError(f"the cpu backend needs CPU tensors; x is on {x.device}")
    return _EdgeSoftmaxAggregate.apply(logits, x, src, dst, num_dst)


def _shifted_exponentials(by_dst, heads_logits, offset, *, find_max: bool, edge_order: bool):
    """exp(logits[e] - offset[dst[e]]) in CSR order (or edge order); ``find_max`` first sets offset to the max."""
    crow = as_array(by_dst.crow)
    shifted = heads_logits.new_empty(heads_logits.shape)
    heads = heads_logits.shape[1]
    launch(_SHIFTED_LOGITS(heads), crow, heads_logits.numel(), as_array(by_dst.perm), as_array(heads_logits),
           offset.numpy(), shifted.numpy(), find_max, edge_order)
    return shifted.exp_()  # one vectorized torch pass: numba's scalar exp is several times slower


class _EdgeSoftmaxAggregate(Function):
    @staticmethod
    def forward(ctx, logits, x, src, dst, num_dst):
        full = broadcast_shape(logits.shape[1:], x.shape[1:])
        k = head_layout(logits.shape[1:], full)
        heads_logits = weight_as_heads(logits, full, k).contiguous()
        heads_x = as_heads(x, full, k).contiguous()
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        by_dst = csr_structure(dst, num_dst, src)
        m = x.new_empty(num_dst, heads)
        ex = _shifted_exponentials(by_dst, heads_logits, m, find_max=True, edge_order=False)
        out = x.new_empty(num_dst, heads, feats)
        s = x.new_empty(num_dst, heads)
        launch(_NORMALIZED_AGGREGATE(feats), as_array(by_dst.crow), src.numel() * heads * feats,
               as_array(by_dst.col), as_array(ex), as_array(heads_x), out.numpy(), s.numpy())
        ctx.save_for_backward(heads_logits, heads_x, src, dst, m, s)
        ctx.layout = (full, k, tuple(logits.shape), tuple(x.shape), num_dst)
        return out.view((num_dst,) + full)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        heads_logits, heads_x, src, dst, m, s = ctx.saved_tensors
        full, k, logits_shape, x_shape, num_dst = ctx.layout
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        by_dst = csr_structure(dst, num_dst, src)
        # alpha[e] = ex[e] * inv_s[dst[e]], formed inside the kernels (destinations with s = 0 have no edges)
        ex = _shifted_exponentials(by_dst, heads_logits, m, find_max=False, edge_order=True)
        saved = (as_array(ex), as_array(s.reciprocal()), as_array(heads_x),
                 as_array(grad.reshape(num_dst, heads, feats)))
        work = src.numel() * heads * feats
        grad_logits = grad_x = None
        if ctx.needs_input_grad[0]:
            gl = ex.new_empty(ex.shape)
            launch(_SOFTMAX_GRAD(feats), as_array(by_dst.crow), work, as_array(by_dst.col), as_array(by_dst.perm),
                   *saved, m.new_empty(m.shape).numpy(), gl.numpy())
            grad_logits = heads_to_weight(gl, logits_shape, full, k)
        if ctx.needs_input_grad[1]:
            by_src = csr_structure(src, heads_x.shape[0], dst)
            gx = heads_x.new_empty(heads_x.shape)
            launch(_WEIGHTED_SCATTER(feats), as_array(by_src.crow), work, as_array(by_src.col),
                   as_array(by_src.perm), saved[0], saved[1], saved[3], gx.numpy())
            grad_x = sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_logits, grad_x, None, None, None


# Kernel factories (see ``specialized``): rows bounds[c]:bounds[c+1] of CSR
# (crow, col = other endpoint, perm = edge id) per parallel chunk. Kernels
# accumulate straight into their per-row outputs and take no array views, so
# numba marks their arrays noalias.

@specialized
def _SHIFTED_LOGITS(width):
    def kernel(bounds, crow, perm, logits, offset, shifted, find_max, edge_order):  # pragma: no cover - numba
        """shifted[i or e] = logits[e] - offset[v] for v's in-edges; find_max: offset[v] = max of them first."""
        heads = logits.shape[1] if width < 0 else width
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                if find_max:
                    for h in range(heads):
                        offset[v, h] = -np.inf
                    for i in range(crow[v], crow[v + 1]):
                        e = perm[i]
                        for h in range(heads):
                            offset[v, h] = max(offset[v, h], logits[e, h])  # max(), not if: vectorizes
                for i in range(crow[v], crow[v + 1]):
                    e = perm[i]
                    row = e if edge_order else i
                    for h in range(heads):
                        shifted[row, h] = logits[e, h] - offset[v, h]
    return kernel


@specialized
def _NORMALIZED_AGGREGATE(width):
    def kernel(bounds, crow, src, ex, x, out, s):  # pragma: no cover - numba
        """s[v] = sum of ex over v's in-edges (CSR order); out[v] = sum of ex * x[src] / s[v] (0 without in-edges)."""
        heads, feats = x.shape[1], (x.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    s[v, h] = 0.0
                    for f in range(feats):
                        out[v, h, f] = 0.0
                for i in range(crow[v], crow[v + 1]):
                    if i + AHEAD < src.shape[0]:
                        prefetch_row(x, src[i + AHEAD])
                    u = src[i]
                    for h in range(heads):
                        w = ex[i, h]
                        s[v, h] += w
                        for f in range(feats):
                            out[v, h, f] += w * x[u, h, f]
                for h in range(heads):
                    inv = 1.0 / s[v, h] if s[v, h] > 0.0 else 0.0
                    for f in range(feats):
                        out[v, h, f] *= inv
    return kernel


@specialized
def _SOFTMAX_GRAD(width):
    def kernel(bounds, crow, src, perm, ex, inv_s, x, grad, total, grad_logits):  # pragma: no cover - numba
        """grad_l[e] = alpha[e] * (d[e] - sum over v's in-edges of alpha * d), d[e] = g[v] . x[u], alpha = ex / s."""
        heads, feats = x.shape[1], (x.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    total[v, h] = 0.0
                for i in range(crow[v], crow[v + 1]):
                    if i + AHEAD < src.shape[0]:
                        prefetch_row(x, src[i + AHEAD])
                    e, u = perm[i], src[i]
                    for h in range(heads):
                        grad_logits[e, h] = 0.0
                        for f in range(feats):
                            grad_logits[e, h] += grad[v, h, f] * x[u, h, f]
                        total[v, h] += ex[e, h] * grad_logits[e, h]
                for i in range(crow[v], crow[v + 1]):
                    e = perm[i]
                    for h in range(heads):
                        grad_logits[e, h] = ex[e, h] * inv_s[v, h] * (grad_logits[e, h] - total[v, h] * inv_s[v, h])
    return kernel


@specialized
def _WEIGHTED_SCATTER(width):
    def kernel(bounds, crow, dst, perm, ex, inv_s, grad, grad_x):  # pragma: no cover - numba
        """grad_x[u] = sum over u's out-edges e of alpha[e] * g[dst[e]], alpha[e] = ex[e] * inv_s[dst[e]]."""
        heads, feats = grad.shape[1], (grad.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for u in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    for f in range(feats):
                        grad_x[u, h, f] = 0.0
                for i in range(crow[u], crow[u + 1]):
                    if i + AHEAD < dst.shape[0]:
                        prefetch_row(grad, dst[i + AHEAD])
                    e, v = perm[i], dst[i]
                    for h in range(heads):
                        w = ex[e, h] * inv_s[v, h]
                        for f in range(feats):
                            grad_x[u, h, f] += w * grad[v, h, f]
    return kernel
