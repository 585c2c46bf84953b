"""Generalized SpMM with max / min as one numba loop over destinations (CPU).

out[v] = max (or min) over v's in-edges of x[src[e]], with the arg-extremum
edge per (node, feature) for backward: each destination reads its sources'
rows once (CSR by destination, vertex-balanced chunks) and writes its row
once; no [E, F] messages and no second pass to find the args. Weighted
messages and sum / mean run on the torch backend. Same contract as
``gnnc.backend.torch.spmm`` (ties go to the smallest edge id; a NaN
extremum has no arg edge); the backward is the torch backend's.
"""
from __future__ import annotations

import math

import torch
from numba import prange

from ..torch.csr import csr_structure
from ..torch.segment import arg_dtype
from ..torch.spmm import _SpmmExtremum, check_spmm
from ..torch.spmm import spmm as torch_spmm
from .interop import as_array, empty, launch, specialized
from .prefetch import prefetch_row

AHEAD = 8


def spmm(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, num_dst: int,
         edge_weight: torch.Tensor | None = None, op: str = "mul", reduce: str = "sum", *,
         chunk: int | None = None) -> torch.Tensor:
    """out[v] = reduce over e with dst[e] == v of (x[src[e]] op edge_weight[e]) (see ``gnnc.backend.torch.spmm``)."""
    num_dst, op = check_spmm(x, src, dst, num_dst, edge_weight, op, reduce)
    if op != "copy" or reduce not in ("max", "min") or x.device.type != "cpu":
        return torch_spmm(x, src, dst, num_dst, edge_weight, op, reduce, chunk=chunk)
    return _SpmmExtremumRows.apply(x, None, src, dst, num_dst, op, reduce, chunk, True)


class _SpmmExtremumRows(_SpmmExtremum):
    """Forward as one numba loop over destinations; backward inherited from the torch backend."""

    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, op, reduce, chunk, want_arg):
        full = tuple(x.shape[1:])
        width = math.prod(full)
        num_edges = src.numel()
        by_dst = csr_structure(dst, num_dst, src)
        out = empty((num_dst,) + full, x)
        arg = empty((num_dst,) + full, x, arg_dtype(num_edges))
        launch(_EXTREMUM_ROWS(width, reduce), as_array(by_dst.crow), num_edges * width, as_array(by_dst.col),
               as_array(by_dst.perm), as_array(x).reshape(x.shape[0], width), out.numpy().reshape(num_dst, width),
               arg.numpy().reshape(num_dst, width))
        ctx.save_for_backward(x, w, src, arg)
        ctx.layout = (full, op)
        return out


@specialized
def _EXTREMUM_ROWS(width, reduce):
    is_max = reduce == "max"  # a constant: the comparison's branch folds away

    def kernel(bounds, crow, src, perm, x, out, arg):  # pragma: no cover - numba
        """out[v] = max (or min) of x[src] over v's in-edges, arg[v] = the first edge attaining it
        (E for none or NaN); 0 without in-edges."""
        cols = x.shape[1] if width < 0 else width
        none = perm.shape[0]
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                start, stop = crow[v], crow[v + 1]
                if start == stop:
                    for k in range(cols):
                        out[v, k] = 0.0
                        arg[v, k] = none
                    continue
                u, e = src[start], perm[start]
                for k in range(cols):
                    val = x[u, k]
                    out[v, k] = val
                    arg[v, k] = none if val != val else e
                for i in range(start + 1, stop):
                    if i + AHEAD < stop:
                        prefetch_row(x, src[i + AHEAD], cols)
                    u, e = src[i], perm[i]
                    for k in range(cols):
                        val = x[u, k]
                        better = val > out[v, k] if is_max else val < out[v, k]
                        nan = val != val
                        out[v, k] = val if better or nan else out[v, k]
                        arg[v, k] = none if nan else (e if better else arg[v, k])
    return kernel
