"""Fused vertex-balanced edge softmax + weighted aggregation (numba, CPU).

Forward: a parallel loop over destinations (CSR by destination) takes the
per-destination max of the logits; torch computes the exponentials in one
vectorized pass ([E, H], the logits' size); a second loop over destinations
sums them and the weighted source rows and normalizes, so the [E, H, F]
messages never exist. Backward recomputes alpha from the saved
per-destination max and denominator; the logit gradient loops over
destinations, the feature gradient over sources (CSR by source), so no loop
needs atomics. Same contract as ``gnnc.backend.torch.edge_softmax_aggregate``.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import prange
from torch.autograd.function import Function, once_differentiable

from ..torch.common import as_heads, broadcast_shape, head_layout, heads_to_weight, sum_to, weight_as_heads
from ..torch.csr import csr_structure
from ..torch.softmax import check_softmax_aggregate
from .interop import as_array, kernel_pair, launch


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


def _exponentials(heads_logits, dst, m):
    """exp(logits - m[dst]) as one vectorized torch pass (numba's scalar exp is several times slower)."""
    return (heads_logits - m.index_select(0, dst)).exp_()


class _EdgeSoftmaxAggregate(Function):
    @staticmethod
    def forward(ctx, logits, x, src, dst, num_dst):
        full = broadcast_shape(logits.shape[1:], x.shape[1:])
        k = head_layout(logits.shape[1:], full)
        heads_logits = weight_as_heads(logits, full, k).contiguous()
        heads_x = as_heads(x, full, k).contiguous()
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        by_dst = csr_structure(dst, num_dst, src)
        crow, col, perm = (as_array(t) for t in (by_dst.crow, by_dst.col, by_dst.perm))
        work = src.numel() * heads * feats
        m = x.new_empty(num_dst, heads)
        launch(_SEGMENT_MAX, crow, work, perm, as_array(heads_logits), m.numpy())
        ex = _exponentials(heads_logits, dst, m)
        out = x.new_empty(num_dst, heads, feats)
        s = x.new_empty(num_dst, heads)
        launch(_NORMALIZED_AGGREGATE, crow, work, col, perm, as_array(ex), as_array(heads_x), out.numpy(), s.numpy())
        ctx.save_for_backward(heads_logits, heads_x, src, dst, m, s)
        ctx.layout = (full, k, tuple(logits.shape), tuple(x.shape), num_dst)
        return out.view((num_dst,) + full)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        heads_logits, heads_x, src, dst, m, s = ctx.saved_tensors
        full, k, logits_shape, x_shape, num_dst = ctx.layout
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        alpha = _exponentials(heads_logits, dst, m).div_(s.index_select(0, dst))
        saved = (as_array(alpha), as_array(heads_x), as_array(grad.reshape(num_dst, heads, feats)))
        work = src.numel() * heads * feats
        grad_logits = grad_x = None
        if ctx.needs_input_grad[0]:
            by_dst = csr_structure(dst, num_dst, src)
            gl = alpha.new_empty(alpha.shape)
            launch(_SOFTMAX_GRAD, as_array(by_dst.crow), work, as_array(by_dst.col), as_array(by_dst.perm),
                   *saved, gl.numpy())
            grad_logits = heads_to_weight(gl, logits_shape, full, k)
        if ctx.needs_input_grad[1]:
            by_src = csr_structure(src, heads_x.shape[0], dst)
            gx = heads_x.new_empty(heads_x.shape)
            launch(_WEIGHTED_SCATTER, as_array(by_src.crow), work, as_array(by_src.col), as_array(by_src.perm),
                   *saved, gx.numpy())
            grad_x = sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_logits, grad_x, None, None, None


# Kernels: rows bounds[c]:bounds[c+1] of CSR (crow, col = other endpoint, perm =
# edge id) per parallel chunk; accumulators are per chunk, outputs per row.

def _segment_max(bounds, crow, perm, logits, m):  # pragma: no cover - compiled by numba
    heads = logits.shape[1]
    for c in prange(bounds.shape[0] - 1):
        for v in range(bounds[c], bounds[c + 1]):
            for h in range(heads):
                m[v, h] = -np.inf
            for i in range(crow[v], crow[v + 1]):
                e = perm[i]
                for h in range(heads):
                    if logits[e, h] > m[v, h]:
                        m[v, h] = logits[e, h]


def _normalized_aggregate(bounds, crow, src, perm, ex, x, out, s):  # pragma: no cover
    """s[v] = sum of ex over v's in-edges; out[v] = sum of ex[e] * x[src[e]] / s[v] (0 without in-edges)."""
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty((heads, feats), x.dtype)
        den = np.empty(heads, x.dtype)
        for v in range(bounds[c], bounds[c + 1]):
            acc[:] = 0.0
            den[:] = 0.0
            for i in range(crow[v], crow[v + 1]):
                e, u = perm[i], src[i]
                for h in range(heads):
                    w = ex[e, h]
                    den[h] += w
                    for f in range(feats):
                        acc[h, f] += w * x[u, h, f]
            for h in range(heads):
                s[v, h] = den[h]
                inv = 1.0 / den[h] if den[h] > 0.0 else 0.0
                for f in range(feats):
                    out[v, h, f] = acc[h, f] * inv


def _softmax_grad(bounds, crow, src, perm, alpha, x, grad, grad_logits):  # pragma: no cover
    """grad_l[e] = alpha[e] * (d[e] - sum over v's in-edges of alpha * d), d[e] = g[v] . x[u]."""
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        total = np.empty(heads, x.dtype)
        for v in range(bounds[c], bounds[c + 1]):
            total[:] = 0.0
            for i in range(crow[v], crow[v + 1]):
                e, u = perm[i], src[i]
                for h in range(heads):
                    d = 0.0
                    for f in range(feats):
                        d += grad[v, h, f] * x[u, h, f]
                    grad_logits[e, h] = d
                    total[h] += alpha[e, h] * d
            for i in range(crow[v], crow[v + 1]):
                e = perm[i]
                for h in range(heads):
                    grad_logits[e, h] = alpha[e, h] * (grad_logits[e, h] - total[h])


def _weighted_scatter(bounds, crow, dst, perm, alpha, x, grad, grad_x):  # pragma: no cover
    """grad_x[u] = sum over u's out-edges e of alpha[e] * g[dst[e]]."""
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty((heads, feats), x.dtype)
        for u in range(bounds[c], bounds[c + 1]):
            acc[:] = 0.0
            for i in range(crow[u], crow[u + 1]):
                e, v = perm[i], dst[i]
                for h in range(heads):
                    w = alpha[e, h]
                    for f in range(feats):
                        acc[h, f] += w * grad[v, h, f]
            for h in range(heads):
                for f in range(feats):
                    grad_x[u, h, f] = acc[h, f]


_SEGMENT_MAX = kernel_pair(_segment_max)
_NORMALIZED_AGGREGATE = kernel_pair(_normalized_aggregate)
_SOFTMAX_GRAD = kernel_pair(_softmax_grad)
_WEIGHTED_SCATTER = kernel_pair(_weighted_scatter)
