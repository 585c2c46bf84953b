"""Fused vertex-balanced edge softmax + weighted aggregation (numba, CPU).

One parallel loop over destinations computes, per destination and head, the
max of the logits, the exponentials, their sum and the weighted sum of
source rows in two passes over the in-edges (CSR by destination); no
per-edge tensor is ever written. Backward is vertex-balanced too: the
logit gradient loops over destinations (alpha recomputed from the saved
per-destination max and denominator), the feature gradient over sources
(CSR by source), so no loop needs atomics. Same contract as
``gnnc.backend.torch.edge_softmax_aggregate``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import prange
from torch.autograd.function import Function, once_differentiable

from ..torch.common import as_heads, head_layout, heads_to_weight, sum_to, weight_as_heads
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


class _EdgeSoftmaxAggregate(Function):
    @staticmethod
    def forward(ctx, logits, x, src, dst, num_dst):
        full = tuple(torch.broadcast_shapes(logits.shape[1:], x.shape[1:]))
        k = head_layout(logits.shape[1:], full)
        heads_logits = weight_as_heads(logits, full, k).contiguous()
        heads_x = as_heads(x, full, k).contiguous()
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        out = x.new_empty(num_dst, heads, feats)
        m = x.new_empty(num_dst, heads)
        s = x.new_empty(num_dst, heads)
        by_dst = csr_structure(dst, num_dst, src)
        launch(_FORWARD, as_array(by_dst.crow), src.numel() * heads * feats, as_array(by_dst.col),
               as_array(by_dst.perm), as_array(heads_logits), as_array(heads_x), out.numpy(), m.numpy(), s.numpy())
        ctx.save_for_backward(heads_logits, heads_x, src, dst, m, s)
        ctx.layout = (full, k, tuple(logits.shape), tuple(x.shape), num_dst)
        return out.view((num_dst,) + full)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        heads_logits, heads_x, src, dst, m, s = ctx.saved_tensors
        full, k, logits_shape, x_shape, num_dst = ctx.layout
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        saved = (as_array(heads_logits), as_array(heads_x), as_array(grad.reshape(num_dst, heads, feats)),
                 m.numpy(), s.numpy())
        work = src.numel() * heads * feats
        grad_logits = grad_x = None
        if ctx.needs_input_grad[0]:
            by_dst = csr_structure(dst, num_dst, src)
            gl = heads_logits.new_empty(heads_logits.shape)
            launch(_BACKWARD_LOGITS, as_array(by_dst.crow), work, as_array(by_dst.col), as_array(by_dst.perm),
                   *saved, gl.numpy())
            grad_logits = heads_to_weight(gl, logits_shape, full, k)
        if ctx.needs_input_grad[1]:
            by_src = csr_structure(src, heads_x.shape[0], dst)
            gx = heads_x.new_empty(heads_x.shape)
            launch(_BACKWARD_X, as_array(by_src.crow), work, as_array(by_src.col), as_array(by_src.perm),
                   *saved, gx.numpy())
            grad_x = sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_logits, grad_x, None, None, None


# Kernels: rows bounds[c]:bounds[c+1] of CSR (crow, col = other endpoint, perm =
# edge id) per parallel chunk; accumulators are per chunk, outputs per row.

def _forward(bounds, crow, src, perm, logits, x, out, m, s):  # pragma: no cover - compiled by numba
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty((heads, feats), x.dtype)
        for v in range(bounds[c], bounds[c + 1]):
            lo, hi = crow[v], crow[v + 1]
            for h in range(heads):
                m[v, h] = -np.inf
                s[v, h] = 0.0
            for i in range(lo, hi):
                e = perm[i]
                for h in range(heads):
                    if logits[e, h] > m[v, h]:
                        m[v, h] = logits[e, h]
            acc[:] = 0.0
            for i in range(lo, hi):
                e, u = perm[i], src[i]
                for h in range(heads):
                    w = math.exp(logits[e, h] - m[v, h])
                    s[v, h] += w
                    for f in range(feats):
                        acc[h, f] += w * x[u, h, f]
            for h in range(heads):
                inv = 1.0 / s[v, h] if s[v, h] > 0.0 else 0.0
                for f in range(feats):
                    out[v, h, f] = acc[h, f] * inv


def _backward_logits(bounds, crow, src, perm, logits, x, grad, m, s, grad_logits):  # pragma: no cover
    """grad_l[e] = alpha[e] * (d[e] - sum over v's in-edges of alpha * d), d[e] = g[v] . x[u]."""
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        total = np.empty(heads, x.dtype)
        for v in range(bounds[c], bounds[c + 1]):
            lo, hi = crow[v], crow[v + 1]
            total[:] = 0.0
            for i in range(lo, hi):
                e, u = perm[i], src[i]
                for h in range(heads):
                    d = 0.0
                    for f in range(feats):
                        d += grad[v, h, f] * x[u, h, f]
                    grad_logits[e, h] = d
                    total[h] += math.exp(logits[e, h] - m[v, h]) / s[v, h] * d
            for i in range(lo, hi):
                e = perm[i]
                for h in range(heads):
                    alpha = math.exp(logits[e, h] - m[v, h]) / s[v, h]
                    grad_logits[e, h] = alpha * (grad_logits[e, h] - total[h])


def _backward_x(bounds, crow, dst, perm, logits, x, grad, m, s, grad_x):  # pragma: no cover
    """grad_x[u] = sum over u's out-edges e of alpha[e] * g[dst[e]]."""
    heads, feats = x.shape[1], x.shape[2]
    for c in prange(bounds.shape[0] - 1):
        acc = np.empty((heads, feats), x.dtype)
        for u in range(bounds[c], bounds[c + 1]):
            acc[:] = 0.0
            for i in range(crow[u], crow[u + 1]):
                e, v = perm[i], dst[i]
                for h in range(heads):
                    alpha = math.exp(logits[e, h] - m[v, h]) / s[v, h]
                    for f in range(feats):
                        acc[h, f] += alpha * grad[v, h, f]
            for h in range(heads):
                for f in range(feats):
                    grad_x[u, h, f] = acc[h, f]


_FORWARD = kernel_pair(_forward)
_BACKWARD_LOGITS = kernel_pair(_backward_logits)
_BACKWARD_X = kernel_pair(_backward_x)
