"""Generalized SpMM as numba loops over destinations (CPU).

Each destination reads its sources' rows once (CSR by destination,
vertex-balanced chunks) and writes its row once; no [E, F] messages.
- copy / mul with sum / mean, any number of heads (a weight per edge and
  head): the weighted sum (``head_spmm_rows``), forward and, over the CSR by
  source, the gradient of x. Against torch's CSR matmul this skips
  zero-filling the output, copying MKL's result out and, for several heads,
  the head-major layout copies and [E, H] copies of the weights (faster
  than torch's block-diagonal or per-head matmul: ``bench/primitives.py
  --backend cpu``);
- copy with max / min: with the arg-extremum edge per (node, feature) for
  backward, found in the same pass; the gradient of x as one loop over the
  sources (CSR by source), each summing the gradient of the (destination,
  feature) entries its out-edges won, with no atomics.
Other ops run on the torch backend. Same contract as
``gnnc.backend.pytorch.spmm`` (ties go to the smallest edge id; a NaN
extremum has no arg edge).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from numba import njit, prange
from torch.autograd.function import Function

from ..pytorch.csr import csr_structure, head_spmm
from ..pytorch.first_order import first_order
from ..pytorch.segment import arg_dtype
from ..pytorch.spmm import _SpmmHeads, check_spmm
from ..pytorch.spmm import scaled_spmm as torch_scaled_spmm
from ..pytorch.spmm import spmm as torch_spmm
from .interop import as_array, constant_width, empty, jit_row_kernel, launch, specialized
from .prefetch import prefetch_row

AHEAD = 8
# The one-head sum loop runs from this many edge-row elements (E * F) up. Its first call in a process loads
# the kernel (about 24 MiB resident and 0.25 s in the bench harness); below this size torch's CSR matmul
# costs less than that (its extra zero-fill and copy are under a few MiB) and is about as fast.
NUMBA_SUM_MIN_ELEMENTS = 1 << 22


def spmm(
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    edge_weight: torch.Tensor | None = None,
    op: str = "mul",
    reduce: str = "sum",
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[v] = reduce over e with dst[e] == v of (x[src[e]] op edge_weight[e]) (see ``gnnc.backend.pytorch.spmm``)."""
    num_dst, op = check_spmm(x, src, dst, num_dst, edge_weight, op, reduce)
    if x.device.type == "cpu" and op in ("copy", "mul") and reduce in ("sum", "mean"):
        return _SpmmHeads.apply(
            x, edge_weight, src, dst, num_dst, reduce == "mean", chunk, head_spmm_rows, None, None, head_spmm_gradients
        )
    if op != "copy" or reduce not in ("max", "min") or x.device.type != "cpu":
        return torch_spmm(x, src, dst, num_dst, edge_weight, op, reduce, chunk=chunk)
    return _SpmmExtremumRows.apply(x, None, src, dst, num_dst, op, reduce, chunk, True)


def scaled_spmm(
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    src_scale: torch.Tensor | None,
    dst_scale: torch.Tensor | None,
    edge_weight: torch.Tensor | None = None,
    reduce: str = "sum",
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """``gnnc.backend.pytorch.scaled_spmm`` with the scales inside the numba sum (``head_spmm_rows``)."""
    return torch_scaled_spmm(
        x,
        src,
        dst,
        num_dst,
        src_scale,
        dst_scale,
        edge_weight,
        reduce,
        chunk=chunk,
        aggregate=head_spmm_rows,
        gradients=head_spmm_gradients,
    )


def head_spmm_rows(
    x: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor | None,
    num_rows: int,
    weight: torch.Tensor | None,
    chunk: int | None = None,
    *,
    row_scale: torch.Tensor | None = None,
    col_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """``csr.head_spmm`` (out[r, h, :] = row_scale[r] * sum over e with rows[e] == r of weight[e, h] *
    col_scale[cols[e]] * x[cols[e], h, :]) as one numba loop over the rows of the cached CSR (``chunk``
    unused: nothing of edge size is written), from ``NUMBA_SUM_MIN_ELEMENTS`` up; smaller sums run as
    ``csr.head_spmm``."""
    heads, feats = x.shape[1], x.shape[2]
    if (
        heads * feats == 0
        or rows.numel() * heads * feats < NUMBA_SUM_MIN_ELEMENTS
        or x.dtype not in (torch.float32, torch.float64)
    ):
        return head_spmm(x, rows, cols, num_rows, weight, chunk, row_scale=row_scale, col_scale=col_scale)
    structure = csr_structure(rows, num_rows, cols)
    out = empty((num_rows, heads, feats), x)
    dtype = out.numpy().dtype
    w = np.empty((0, 1), dtype=dtype) if weight is None else as_array(weight)
    scaled, scales = _scale_arrays(row_scale, num_rows, col_scale, x.shape[0], dtype)
    # Without weights the heads are one row of heads * feats (the kernel reads one head).
    row = feats if weight is not None else heads * feats
    launch(
        _sum_rows(constant_width(row), weight is not None, scaled),
        as_array(structure.crow),
        rows.numel() * heads * feats,
        as_array(structure.col),
        as_array(structure.perm),
        w,
        *scales,
        as_array(x).reshape(x.shape[0], heads * feats),
        out.numpy().reshape(num_rows, heads * feats),
    )
    return out


def _scale_arrays(row_scale, num_rows: int, col_scale, num_cols: int, dtype) -> tuple[bool, list]:
    """(scaled, [row scales, column scales]) as the kernels take them: empty arrays when neither is given,
    else ones standing in for an absent one (one kernel serves either side)."""
    scaled = row_scale is not None or col_scale is not None
    return scaled, [
        np.empty(0, dtype=dtype) if not scaled else np.ones(n, dtype=dtype) if t is None else as_array(t)
        for t, n in ((row_scale, num_rows), (col_scale, num_cols))
    ]


@njit(inline="always")
def spread_weights(spread, w, e, width, factor):  # pragma: no cover - numba
    """spread[h * width:(h + 1) * width] = w[e, h] * factor for every head h: the row's multiply-add then runs
    as one straight loop, which vectorizes (faster than a loop per head)."""
    for h in range(w.shape[1]):
        wh = w[e, h] * factor
        for k in range(h * width, (h + 1) * width):
            spread[k] = wh


@functools.cache
def _sum_rows(feats: int, weighted: bool, scaled: bool):
    """The weighted-sum kernel for heads of ``feats`` features (-1: read at run time; the head count is the
    weight's, one without weights), with a scale per row and per column when ``scaled``, compiled serial
    (``jit_row_kernel``: its row loops vectorize without numba's noalias marking, and it starts sooner)."""

    def kernel(bounds, crow, cols_of, perm, w, row_scale, col_scale, x, out):  # pragma: no cover - numba
        """out[r, head h] = row_scale[r] * sum over r's sorted entries i of w[perm[i], h] * col_scale[u] *
        x[u, head h], u = cols_of[i] (one head and no weights when not weighted, no scales when not scaled)."""
        heads = w.shape[1] if weighted else 1
        width = x.shape[1] // heads if feats < 0 else feats
        cols = heads * width
        spread = np.empty(cols if weighted else 0, dtype=x.dtype)
        for r in range(bounds[0], bounds[-1]):
            start, stop = crow[r], crow[r + 1]
            for k in range(cols):
                out[r, k] = 0.0
            for i in range(start, stop):
                if i + AHEAD < cols_of.shape[0]:  # past this row: the next rows' first entries
                    prefetch_row(x, cols_of[i + AHEAD], cols)
                    if weighted:  # edge order: the weights of a row's entries are scattered too
                        prefetch_row(w, perm[i + AHEAD], heads)
                u = cols_of[i]
                if weighted:
                    spread_weights(spread, w, perm[i], width, col_scale[u] if scaled else 1.0)
                    for k in range(cols):
                        out[r, k] += spread[k] * x[u, k]
                elif scaled:
                    c = col_scale[u]
                    for k in range(cols):
                        out[r, k] += c * x[u, k]
                else:
                    for k in range(cols):
                        out[r, k] += x[u, k]
            if scaled:
                f = row_scale[r]
                for k in range(cols):
                    out[r, k] *= f

    return jit_row_kernel(kernel)


def head_spmm_gradients(
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_src: int,
    row_scale: torch.Tensor | None,
    col_scale: torch.Tensor | None,
) -> tuple | None:
    """Both gradients of the weighted head sum ``out[v, h] = col_scale[v] * sum over e = u->v of weight[e, h] *
    row_scale[u] * x[u, h]`` for the upstream ``grad`` [D, H, F], in one numba loop over the CSR by source:
    each gradient row gathered once serves grad_x[u] (skipped when ``weight`` is None) and every grad_w[e, h]
    (``_SpmmHeads``' ``gradients``). None below ``NUMBA_SUM_MIN_ELEMENTS`` or for other dtypes (the caller then
    takes the separate sums)."""
    heads, feats = x.shape[1], x.shape[2]
    num_edges = src.numel()
    if (
        heads * feats == 0
        or num_edges * heads * feats < NUMBA_SUM_MIN_ELEMENTS
        or x.dtype not in (torch.float32, torch.float64)
    ):
        return None
    structure = csr_structure(src, num_src, dst)
    grad_x = None if weight is None else empty((num_src, heads, feats), x)
    grad_w = empty((num_edges, heads), x)
    dtype = grad_w.numpy().dtype
    scaled, scales = _scale_arrays(row_scale, num_src, col_scale, grad.shape[0], dtype)
    launch(
        _gradient_rows(constant_width(feats), weight is not None, scaled),
        as_array(structure.crow),
        num_edges * heads * feats,
        as_array(structure.col),
        as_array(structure.perm),
        np.empty((0, heads), dtype=dtype) if weight is None else as_array(weight),
        *scales,
        as_array(grad).reshape(grad.shape[0], heads * feats),
        as_array(x).reshape(num_src, heads * feats),
        np.empty((0, heads * feats), dtype=dtype) if grad_x is None else grad_x.numpy().reshape(num_src, -1),
        grad_w.numpy(),
    )
    return grad_x, grad_w


@functools.cache
def _gradient_rows(feats: int, need_x: bool, scaled: bool):
    """The kernel of ``head_spmm_gradients`` for heads of ``feats`` features (-1: read at run time), compiled
    serial as ``_sum_rows``."""

    def kernel(bounds, crow, cols_of, perm, w, row_scale, col_scale, grad, x, grad_x, grad_w):  # pragma: no cover
        """Over source rows u: grad_w[e, h] = row_scale[u] * col_scale[v] * grad[v, head h] . x[u, head h] for
        u's entries e = u->v; grad_x[u, head h] = row_scale[u] * sum over them of w[e, h] * col_scale[v] *
        grad[v, head h] when need_x."""
        heads = grad_w.shape[1]
        width = x.shape[1] // heads if feats < 0 else feats
        cols = heads * width
        spread = np.empty(cols if need_x else 0, dtype=x.dtype)
        for r in range(bounds[0], bounds[-1]):
            start, stop = crow[r], crow[r + 1]
            if need_x:
                for k in range(cols):
                    grad_x[r, k] = 0.0
            for i in range(start, stop):
                if i + AHEAD < cols_of.shape[0]:  # past this row: the next rows' first entries
                    prefetch_row(grad, cols_of[i + AHEAD], cols)
                v, e = cols_of[i], perm[i]
                for h in range(heads):
                    lo = h * width
                    dot = grad[v, lo] * x[r, lo]
                    for k in range(lo + 1, lo + width):
                        dot += grad[v, k] * x[r, k]
                    grad_w[e, h] = dot * (row_scale[r] * col_scale[v]) if scaled else dot
                if need_x:
                    spread_weights(spread, w, e, width, col_scale[v] if scaled else 1.0)
                    for k in range(cols):
                        grad_x[r, k] += spread[k] * grad[v, k]
            if need_x and scaled:
                f = row_scale[r]
                for k in range(cols):
                    grad_x[r, k] *= f

    return jit_row_kernel(kernel)


class _SpmmExtremumRows(Function):
    """Forward as one numba loop over destinations, backward as one over sources (copy messages only)."""

    @staticmethod
    def forward(ctx, x, w, src, dst, num_dst, op, reduce, chunk, want_arg):
        full = tuple(x.shape[1:])
        width = math.prod(full)
        num_edges = src.numel()
        by_dst = csr_structure(dst, num_dst, src)
        out = empty((num_dst,) + full, x)
        arg = empty((num_dst,) + full, x, arg_dtype(num_edges))
        launch(
            _EXTREMUM_ROWS(width, reduce),
            as_array(by_dst.crow),
            num_edges * width,
            as_array(by_dst.col),
            as_array(by_dst.perm),
            as_array(x).reshape(x.shape[0], width),
            out.numpy().reshape(num_dst, width),
            arg.numpy().reshape(num_dst, width),
        )
        ctx.save_for_backward(src, dst, arg)
        ctx.layout = (x.shape, width)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        src, dst, arg = ctx.saved_tensors
        x_shape, width = ctx.layout
        if not ctx.needs_input_grad[0]:
            return (None,) * 9
        grad_x = empty(x_shape, grad)
        by_src = csr_structure(src, x_shape[0], dst)
        launch(
            _EXTREMUM_ROWS_GRAD(width),
            as_array(by_src.crow),
            src.numel() * width,
            as_array(by_src.col),
            as_array(by_src.perm),
            as_array(grad.contiguous()).reshape(-1, width),
            arg.numpy().reshape(-1, width),
            grad_x.numpy().reshape(x_shape[0], width),
        )
        return grad_x, None, None, None, None, None, None, None, None


@specialized
def _EXTREMUM_ROWS_GRAD(width):
    def kernel(bounds, crow, dst, perm, grad, arg, grad_x):  # pragma: no cover - numba
        """grad_x[u, k] = sum over u's out-edges e = u->v with arg[v, k] == e of grad[v, k]."""
        cols = grad.shape[1] if width < 0 else width
        zero = grad_x.dtype.type(0)
        for c in prange(bounds.shape[0] - 1):
            for u in range(bounds[c], bounds[c + 1]):
                for k in range(cols):
                    grad_x[u, k] = zero
                for i in range(crow[u], crow[u + 1]):
                    if i + AHEAD < dst.shape[0]:  # both rows of the edge AHEAD are read at random
                        prefetch_row(arg, dst[i + AHEAD], cols)
                        prefetch_row(grad, dst[i + AHEAD], cols)
                    v, e = dst[i], perm[i]
                    for k in range(cols):
                        grad_x[u, k] += grad[v, k] if arg[v, k] == e else zero

    return kernel


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
                    if i + AHEAD < src.shape[0]:  # past this row: the next rows' first entries
                        prefetch_row(x, src[i + AHEAD], cols)
                    u, e = src[i], perm[i]
                    for k in range(cols):
                        val = x[u, k]
                        better = val > out[v, k] if is_max else val < out[v, k]
                        nan = val != val
                        out[v, k] = val if better or nan else out[v, k]
                        arg[v, k] = none if nan else (e if better else arg[v, k])

    return kernel
