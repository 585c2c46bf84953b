"""Per-head dot products with shared weight rows as one numba loop over rows (CPU).

Same contract as ``gnnc.backend.pytorch.head_dot``. Each row of x is read
once and the K scores of every head written, weight by weight, into
contiguous [rows, H] blocks: the result is a [rows, H, K] view of [K, rows,
H] storage, so a consumer of one weight's scores (GAT's source and
destination halves) reads them as a contiguous array, with no copy. Memory
bound: about one pass over x. Backward in torch (two einsums).
"""

from __future__ import annotations

import torch
from torch.autograd.function import Function

from ..pytorch.first_order import first_order
from ..pytorch.head_dot import check_head_dot
from .interop import empty, jit_row_kernel, launch_rows


def head_dot(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """out[r, h, j] = sum_f x[r, h, f] * weights[j, h, f] (see ``gnnc.backend.pytorch.head_dot``)."""
    check_head_dot(x, weights)
    if x.device.type != "cpu":
        raise ValueError(f"the cpu backend needs CPU tensors; x is on {x.device}")
    return _HeadDot.apply(x, weights)


class _HeadDot(Function):
    @staticmethod
    def forward(ctx, x, weights):
        x_rows, w_rows = x.detach().contiguous(), weights.detach().contiguous()
        out = empty((weights.shape[0], x.shape[0], x.shape[1]), x)
        launch_rows(_ROWS, x.shape[0], x.numel() * weights.shape[0], x_rows.numpy(), w_rows.numpy(), out.numpy())
        ctx.save_for_backward(x, weights)
        return out.permute(1, 2, 0)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, weights = ctx.saved_tensors
        grad_x = torch.einsum("rhk,khf->rhf", grad, weights) if ctx.needs_input_grad[0] else None
        grad_w = torch.einsum("rhk,rhf->khf", grad, x) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


def _rows(bounds, x, w, out):  # pragma: no cover - numba
    """out[j, r, h] = x[r, h] . w[j, h] for the rows r of ``bounds``' ranges."""
    heads, feats = x.shape[1], x.shape[2]
    for c in range(bounds.shape[0] - 1):
        for r in range(bounds[c], bounds[c + 1]):
            for j in range(w.shape[0]):
                for h in range(heads):
                    total = x.dtype.type(0)
                    for f in range(feats):
                        total += x[r, h, f] * w[j, h, f]
                    out[j, r, h] = total


_ROWS = jit_row_kernel(_rows)
