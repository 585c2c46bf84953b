"""Generalized SDDMM with a binary operator as one numba loop over edges (CPU).

out[e] = a[a_index[e]] op b[b_index[e]] for op in add, sub, mul, div when a
and b have the same feature shape, with the optional leaky_relu applied
before the store: each edge reads its two rows and writes its output row
once, with no gathered [E, ...] operands in between. Other
cases (dot, broadcast feature shapes) run on the torch backend. Same
contract as ``gnnc.backend.torch.sddmm``; the backward is the torch
backend's (it saves only a, b and the indices).
"""
from __future__ import annotations

import math

import torch
from numba import prange

from ..torch.sddmm import _SddmmBinary, check_sddmm
from ..torch.sddmm import sddmm as torch_sddmm
from .interop import as_array, launch_rows, specialized


def sddmm(a: torch.Tensor, a_index: torch.Tensor, b: torch.Tensor, b_index: torch.Tensor, op: str = "mul", *,
          negative_slope: float | None = None, chunk: int | None = None) -> torch.Tensor:
    """out[e] = a[a_index[e]] op b[b_index[e]], then leaky_relu (see ``gnnc.backend.torch.sddmm``)."""
    full = check_sddmm(a, a_index, b, b_index, op, negative_slope)
    if op == "dot" or a.device.type != "cpu" or not (tuple(a.shape[1:]) == tuple(b.shape[1:]) == full):
        return torch_sddmm(a, a_index, b, b_index, op, negative_slope=negative_slope, chunk=chunk)
    return _SddmmBinaryRows.apply(a, a_index, b, b_index, op, negative_slope, chunk)


class _SddmmBinaryRows(_SddmmBinary):
    """Forward as one numba loop over edges; backward inherited from the torch backend."""

    @staticmethod
    def forward(ctx, a, a_index, b, b_index, op, negative_slope, chunk):
        full = tuple(a.shape[1:])
        width = math.prod(full)
        num_edges = a_index.numel()
        out = a.new_empty((num_edges,) + full)
        slope = 1.0 if negative_slope is None else float(negative_slope)  # 1: the identity
        launch_rows(_BINARY_ROWS(width, op), num_edges, num_edges * width, as_array(a_index), as_array(b_index),
                    as_array(a).reshape(a.shape[0], width), as_array(b).reshape(b.shape[0], width),
                    out.numpy().reshape(num_edges, width), out.numpy().dtype.type(slope))
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (full, op, negative_slope, chunk)
        return out


@specialized
def _BINARY_ROWS(width, op):
    code = ("add", "sub", "mul", "div").index(op)  # an int constant: the branch below folds away

    def kernel(bounds, a_index, b_index, a, b, out, slope):  # pragma: no cover - numba
        """out[e] = leaky_relu(a[a_index[e]] op b[b_index[e]], slope), rows of ``width`` elements."""
        cols = out.shape[1] if width < 0 else width
        for c in prange(bounds.shape[0] - 1):
            for e in range(bounds[c], bounds[c + 1]):
                u, v = a_index[e], b_index[e]
                for k in range(cols):
                    if code == 0:
                        y = a[u, k] + b[v, k]
                    elif code == 1:
                        y = a[u, k] - b[v, k]
                    elif code == 2:
                        y = a[u, k] * b[v, k]
                    else:
                        y = a[u, k] / b[v, k]
                    out[e, k] = y if y > 0 else y * slope
    return kernel
