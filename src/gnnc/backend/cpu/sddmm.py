"""Generalized SDDMM with a binary operator or a per-head dot as one numba loop over edges (CPU).

out[e] = a[a_index[e]] op b[b_index[e]] for op in add, sub, mul, div when a
and b have the same feature shape, with the optional leaky_relu applied
before the store: each edge reads its two rows (asked for ``AHEAD`` edges
early: both are read at random) and writes its output row once, with no
gathered [E, ...] operands in between. The backward saves
only a, b and the indices: one loop over a's rows (CSR by a_index) and one
over b's rows (CSR by b_index) recompute each edge's pre-activation and sum
their gradients straight into the row, with no atomics. ``dot`` of
operands of one feature shape [.., F] writes each edge's per-head sums in
the same one loop (HGT's attention scores; its backward is the torch
backend's, its two weighted sums numba loops: ``spmm.head_spmm_rows``).
Broadcast feature shapes run on the torch backend. Same contract as
``gnnc.backend.pytorch.sddmm``.
"""

from __future__ import annotations

import math

import numba
import torch
from numba import prange
from torch.autograd.function import Function

from ..pytorch.common import BINARY_OPS
from ..pytorch.csr import csr_structure
from ..pytorch.first_order import first_order
from ..pytorch.sddmm import SddmmDot, check_sddmm
from ..pytorch.sddmm import sddmm as torch_sddmm
from .interop import as_array, empty, launch, launch_rows, specialized
from .prefetch import prefetch_row
from .spmm import AHEAD, head_spmm_rows


def sddmm(
    a: torch.Tensor,
    a_index: torch.Tensor,
    b: torch.Tensor,
    b_index: torch.Tensor,
    op: str = "mul",
    *,
    negative_slope: float | None = None,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[e] = a[a_index[e]] op b[b_index[e]], then leaky_relu (see ``gnnc.backend.pytorch.sddmm``)."""
    full = check_sddmm(a, a_index, b, b_index, op, negative_slope)
    if a.device.type != "cpu" or not (tuple(a.shape[1:]) == tuple(b.shape[1:]) == full) or (op == "dot" and not full):
        return torch_sddmm(a, a_index, b, b_index, op, negative_slope=negative_slope, chunk=chunk)
    if op == "dot":
        return _SddmmDotRows.apply(a, a_index, b, b_index, chunk)
    return _SddmmBinaryRows.apply(a, a_index, b, b_index, op, negative_slope)


class _SddmmDotRows(SddmmDot):
    """Forward as one numba loop over edges; backward the torch backend's, its sums by ``head_spmm_rows``."""

    @staticmethod
    def forward(ctx, a, a_index, b, b_index, chunk):
        full = tuple(a.shape[1:])
        feats, heads = full[-1], math.prod(full[:-1])
        num_edges = a_index.numel()
        out = empty((num_edges, heads), a)
        launch_rows(
            _DOT_ROWS(feats),
            num_edges,
            num_edges * heads * feats,
            as_array(a_index),
            as_array(b_index),
            as_array(a).reshape(a.shape[0], heads, feats),
            as_array(b).reshape(b.shape[0], heads, feats),
            out.numpy(),
        )
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (full, chunk, head_spmm_rows)
        return out.view((num_edges,) + full[:-1] + (1,))


class _SddmmBinaryRows(Function):
    """Forward as one numba loop over edges; backward as one loop over the rows of each operand."""

    @staticmethod
    def forward(ctx, a, a_index, b, b_index, op, negative_slope):
        full = tuple(a.shape[1:])
        width = math.prod(full)
        num_edges = a_index.numel()
        out = empty((num_edges,) + full, a)
        slope = 1.0 if negative_slope is None else float(negative_slope)  # 1: the identity
        launch_rows(
            _BINARY_ROWS(width, op),
            num_edges,
            num_edges * width,
            as_array(a_index),
            as_array(b_index),
            as_array(a).reshape(a.shape[0], width),
            as_array(b).reshape(b.shape[0], width),
            out.numpy().reshape(num_edges, width),
            out.numpy().dtype.type(slope),
        )
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (op, slope)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        a, a_index, b, b_index = ctx.saved_tensors
        grad_a, grad_b = binary_rows_grads(a, a_index, b, b_index, grad, *ctx.layout, ctx.needs_input_grad[0:3:2])
        return grad_a, None, grad_b, None, None, None


def binary_rows_grads(a, a_index, b, b_index, grad, op: str, slope: float, needed) -> list:
    """[grad_a, grad_b] of out[e] = leaky_relu(a[a_index[e]] op b[b_index[e]], slope) for the upstream
    ``grad`` [E, ...] (a, b and grad of one feature shape; slope 1: no activation); None where ``needed``
    (two flags) is false. One numba loop over the rows of each operand."""
    width = math.prod(a.shape[1:])
    num_edges = a_index.numel()
    rows = (
        as_array(a).reshape(a.shape[0], width),
        as_array(b).reshape(b.shape[0], width),
        as_array(grad).reshape(num_edges, width),
        grad.numpy().dtype.type(slope),
    )
    grads = []
    for side, (t, index, other) in enumerate(((a, a_index, b_index), (b, b_index, a_index))):
        if not needed[side]:
            grads.append(None)
            continue
        by_row = csr_structure(index, t.shape[0], other)
        g = empty(t.shape, t)
        launch(
            _BINARY_ROWS_GRAD(width, op, side),
            as_array(by_row.crow),
            num_edges * width,
            as_array(by_row.col),
            as_array(by_row.perm),
            *rows,
            g.numpy().reshape(t.shape[0], width),
        )
        grads.append(g)
    return grads


@numba.njit
def _binary(code, x, y):  # pragma: no cover - numba; inlined by LLVM, where the constant code folds the branches
    """x op y for op = BINARY_OPS[code]."""
    if code == 0:
        return x + y
    if code == 1:
        return x - y
    if code == 2:
        return x * y
    return x / y


@specialized
def _BINARY_ROWS(width, op):
    code = BINARY_OPS.index(op)

    def kernel(bounds, a_index, b_index, a, b, out, slope):  # pragma: no cover - numba
        """out[e] = leaky_relu(a[a_index[e]] op b[b_index[e]], slope), rows of ``width`` elements."""
        cols = out.shape[1] if width < 0 else width
        for c in prange(bounds.shape[0] - 1):
            for e in range(bounds[c], bounds[c + 1]):
                if e + AHEAD < a_index.shape[0]:  # both rows are read at random
                    prefetch_row(a, a_index[e + AHEAD], cols)
                    prefetch_row(b, b_index[e + AHEAD], cols)
                u, v = a_index[e], b_index[e]
                for k in range(cols):
                    y = _binary(code, a[u, k], b[v, k])
                    out[e, k] = y if y > 0 else y * slope

    return kernel


@specialized
def _DOT_ROWS(width):
    def kernel(bounds, a_index, b_index, a, b, out):  # pragma: no cover - numba
        """out[e, h] = a[a_index[e], h] . b[b_index[e], h], rows of ``width`` features per head."""
        feats = a.shape[2] if width < 0 else width
        row = out.shape[1] * feats
        zero = out.dtype.type(0)  # sums in the rows' type: a float64 sum of float32 products is not vectorized
        for c in prange(bounds.shape[0] - 1):
            for e in range(bounds[c], bounds[c + 1]):
                if e + AHEAD < a_index.shape[0]:  # both rows are read at random
                    prefetch_row(a, a_index[e + AHEAD], row)
                    prefetch_row(b, b_index[e + AHEAD], row)
                u, v = a_index[e], b_index[e]
                for h in range(out.shape[1]):
                    total = zero
                    for k in range(feats):
                        total += a[u, h, k] * b[v, h, k]
                    out[e, h] = total

    return kernel


@specialized
def _BINARY_ROWS_GRAD(width, op, side):
    code = BINARY_OPS.index(op)

    def kernel(bounds, crow, other, perm, a, b, grad, slope, out):  # pragma: no cover - numba
        """out[r] = sum over the edges e of row r (of a if side 0, else of b) of d(leaky(a op b))/d(row) * grad[e]."""
        cols = grad.shape[1] if width < 0 else width
        for c in prange(bounds.shape[0] - 1):
            for r in range(bounds[c], bounds[c + 1]):
                for k in range(cols):
                    out[r, k] = 0.0
                for i in range(crow[r], crow[r + 1]):
                    e, q = perm[i], other[i]
                    u, v = (r, q) if side == 0 else (q, r)
                    for k in range(cols):
                        x, y = a[u, k], b[v, k]
                        g = grad[e, k] if _binary(code, x, y) > 0 else grad[e, k] * slope
                        if code == 0:
                            d = g
                        elif code == 1:
                            d = g if side == 0 else -g
                        elif code == 2:
                            d = g * y if side == 0 else g * x
                        else:
                            d = g / y if side == 0 else -g * x / (y * y)
                        out[r, k] += d

    return kernel
