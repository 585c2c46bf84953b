"""Fused vertex-balanced edge softmax + weighted aggregation (numba, CPU).

Forward: a loop over destinations (CSR by destination) takes each
destination's max logit and writes the shifted logits in CSR order; torch
exponentiates them in one vectorized pass ([E, H], the logits' size); a
second loop over destinations sums them and the weighted source rows and
normalizes, so the [E, H, F] messages never exist. Backward recomputes
alpha from the saved per-destination max and denominator (one shift pass +
exp, in edge order); the logit gradient loops over destinations, the
feature gradient over sources (CSR by source), so no loop needs atomics.

``sddmm_softmax_aggregate`` runs the same loops on logits
act(a[src] op b[dst]) that the shift pass computes from the rows of a and b
(no [E, H] logits or separate SDDMM pass); its backward turns the logit
gradient into those of a and b with the SDDMM backward's row loops. Same
contracts as ``gnnc.backend.torch.edge_softmax_aggregate`` and
``sddmm_softmax_aggregate``.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import torch
from numba import prange
from torch.autograd.function import Function, once_differentiable

from ..torch.common import BINARY_OPS, as_heads, broadcast_shape, head_layout, heads_to_weight, sum_to, weight_as_heads
from ..torch.csr import csr_structure
from ..torch.softmax import check_softmax_aggregate, check_sddmm_softmax_aggregate
from .codegen import indent, load_function
from .interop import as_array, constant_width, launch, specialized
from .prefetch import prefetch_row
from .sddmm import _binary, binary_rows_grads, sddmm

# How many edges ahead the gathers of feature rows ask for them (logit rows are too narrow to gain).
AHEAD = 8
# Rows up to this many accumulators (heads x features) get a generated kernel that keeps them in registers.
MAX_GENERATED_ROW = 128


def edge_softmax_aggregate(logits: torch.Tensor, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                           num_dst: int, *, chunk: int | None = None) -> torch.Tensor:
    """out[v] = sum over e with dst[e] == v of edge_softmax(logits)[e] * x[src[e]].

    Shapes and broadcasting as in the torch backend; ``chunk`` is accepted
    for signature compatibility and ignored (no edge chunks exist here).
    """
    logits, num_dst = check_softmax_aggregate(logits, x, src, dst, num_dst)
    _check_cpu(x)
    return _SoftmaxAggregate.apply(logits, None, x, src, dst, num_dst, None, 1.0)


def sddmm_softmax_aggregate(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, src: torch.Tensor,
                            dst: torch.Tensor, num_dst: int, op: str = "add", *, negative_slope: float | None = None,
                            chunk: int | None = None) -> torch.Tensor:
    """edge_softmax_aggregate(sddmm(a, src, b, dst, op, negative_slope=negative_slope), x, src, dst, num_dst).

    Fused (the logits are computed inside the kernels, never stored) when
    ``a`` and ``b`` have one feature shape (GAT: [N, H] and [num_dst, H]
    against x [N, H, F]); otherwise the composition of this backend's
    primitives. ``chunk`` is passed to the composition only.
    """
    logits_feat, num_dst = check_sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, op, negative_slope)
    _check_cpu(x)
    if tuple(a.shape[1:]) != tuple(b.shape[1:]):
        logits = sddmm(a, src, b, dst, op, negative_slope=negative_slope, chunk=chunk)
        return edge_softmax_aggregate(logits, x, src, dst, num_dst)
    slope = 1.0 if negative_slope is None else float(negative_slope)  # 1: the identity
    a, b = (t.reshape((t.shape[0],) + logits_feat) for t in (a, b))
    return _SoftmaxAggregate.apply(a, b, x, src, dst, num_dst, op, slope)


def _check_cpu(x: torch.Tensor) -> None:
    if x.device.type != "cpu":
        raise ValueError(f"the cpu backend needs CPU tensors; x is on {x.device}")


class _Logits(NamedTuple):
    """Where the kernels read the logit of edge e, head h: ``a[e, h]`` (``op`` None: a holds [E, H]
    logits) or leaky_relu(a[src[e], h] op b[dst[e], h], slope) from rows [N_src, H] and [num_dst, H]."""

    a: torch.Tensor
    b: torch.Tensor | None
    op: str | None
    slope: float


def _shifted_exponentials(by_dst, logits: _Logits, offset, *, find_max: bool, edge_order: bool):
    """exp(l[e] - offset[dst[e]]) in CSR order (or edge order); ``find_max`` first sets offset to the max."""
    num_edges, heads = by_dst.perm.numel(), logits.a.shape[1]
    shifted = logits.a.new_empty(num_edges, heads)
    b = logits.a.new_empty(0, heads) if logits.b is None else logits.b  # op None: never read
    # a and b are passed as they are laid out (GAT's are column slices of one matmul): a copy would cost more
    launch(_SHIFTED_LOGITS(heads, logits.op), as_array(by_dst.crow), num_edges * heads, as_array(by_dst.perm),
           as_array(by_dst.col), logits.a.detach().numpy(), b.detach().numpy(),
           shifted.numpy().dtype.type(logits.slope), offset.numpy(), shifted.numpy(), find_max, edge_order)
    return shifted.exp_()  # one vectorized torch pass: numba's scalar exp is several times slower


class _SoftmaxAggregate(Function):
    """Softmax by destination of the logits ``_Logits(a, b, op, slope)``, weighting x[src]; a / b feature
    shapes are the logits' (right-aligned against x's, as ``edge_softmax_aggregate``'s logits)."""

    @staticmethod
    def forward(ctx, a, b, x, src, dst, num_dst, op, slope):
        full = broadcast_shape(a.shape[1:], x.shape[1:])
        k = head_layout(a.shape[1:], full)
        logits = _Logits(weight_as_heads(a, full, k), None if b is None else weight_as_heads(b, full, k), op, slope)
        heads_x = as_heads(x, full, k).contiguous()
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        by_dst = csr_structure(dst, num_dst, src)
        m = x.new_empty(num_dst, heads)
        ex = _shifted_exponentials(by_dst, logits, m, find_max=True, edge_order=False)
        out = x.new_empty(num_dst, heads, feats)
        s = x.new_empty(num_dst, heads)
        launch(_NORMALIZED_AGGREGATE(feats, constant_width(heads)), as_array(by_dst.crow), src.numel() * heads * feats,
               as_array(by_dst.col), as_array(ex), as_array(heads_x), out.numpy(), s.numpy())
        ctx.save_for_backward(logits.a, logits.b, heads_x, src, dst, m, s)
        ctx.layout = (full, k, num_dst, op, slope)
        ctx.shapes = tuple(None if t is None else tuple(t.shape) for t in (a, b, x))
        return out.view((num_dst,) + full)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        heads_a, heads_b, heads_x, src, dst, m, s = ctx.saved_tensors
        full, k, num_dst, op, slope = ctx.layout
        a_shape, b_shape, x_shape = ctx.shapes
        heads, feats = heads_x.shape[1], heads_x.shape[2]
        by_dst = csr_structure(dst, num_dst, src)
        logits = _Logits(heads_a, heads_b, op, slope)
        # alpha[e] = ex[e] * inv_s[dst[e]], formed inside the kernels (destinations with s = 0 have no edges)
        ex = _shifted_exponentials(by_dst, logits, m, find_max=False, edge_order=True)
        saved = (as_array(ex), as_array(s.reciprocal()), as_array(heads_x),
                 as_array(grad.reshape(num_dst, heads, feats)))
        work = src.numel() * heads * feats
        grad_a = grad_b = grad_x = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            gl = ex.new_empty(ex.shape)
            launch(_SOFTMAX_GRAD(feats, constant_width(heads)), as_array(by_dst.crow), work, as_array(by_dst.col),
                   as_array(by_dst.perm), *saved, m.new_empty(m.shape).numpy(), gl.numpy())
            grads = _logit_source_grads(logits, src, dst, gl, ctx.needs_input_grad[:2])
            grad_a, grad_b = (None if g is None else heads_to_weight(g, shape, full, k)
                              for g, shape in zip(grads, (a_shape, b_shape)))
        if ctx.needs_input_grad[2]:
            by_src = csr_structure(src, heads_x.shape[0], dst)
            gx = heads_x.new_empty(heads_x.shape)
            launch(_WEIGHTED_SCATTER(feats, constant_width(heads)), as_array(by_src.crow), work, as_array(by_src.col),
                   as_array(by_src.perm), saved[0], saved[1], saved[3], gx.numpy())
            grad_x = sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_a, grad_b, grad_x, None, None, None, None, None


def _logit_source_grads(logits: _Logits, src, dst, grad_logits, needed) -> list:
    """[grad of logits.a, grad of logits.b] (head form) from the gradient [E, H] of the logits."""
    if logits.op is None:
        return [grad_logits if needed[0] else None, None]
    return binary_rows_grads(logits.a, src, logits.b, dst, grad_logits, logits.op, logits.slope, needed)


# Kernel factories (see ``specialized``): rows bounds[c]:bounds[c+1] of CSR
# (crow, col = other endpoint, perm = edge id) per parallel chunk. The head
# count is a constant too where it can be (``constant_width``; ~20 % off the
# aggregation at 8 heads of 8). Kernels take no array views, so numba marks
# their arrays noalias; still, LLVM stores and reloads accumulators that
# live in an output row after every edge (the row's strides are run-time
# values), so the two aggregation loops are generated with one scalar per
# accumulator when both widths are constants (``_weighted_rows_source``:
# another ~20 % at 8 heads of 8).

@specialized
def _SHIFTED_LOGITS(width, op):
    code = -1 if op is None else BINARY_OPS.index(op)

    def kernel(bounds, crow, perm, src, a, b, slope, offset, shifted, find_max, edge_order):  # pragma: no cover
        """shifted[i or e] = l[e] - offset[v] for v's in-edges; find_max: offset[v] = max of them first
        (the logits are stored as they are found, then shifted in place: each row of a and b is read once).
        l[e] = a[e] (op None) or leaky_relu(a[src[e]] op b[v], slope) (see ``_Logits``)."""
        heads = a.shape[1] if width < 0 else width
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                if find_max:
                    for h in range(heads):
                        offset[v, h] = -np.inf
                    for i in range(crow[v], crow[v + 1]):
                        r = perm[i] if code < 0 else src[i]
                        row = perm[i] if edge_order else i
                        for h in range(heads):
                            y = _logit(code, a, b, slope, r, v, h)
                            shifted[row, h] = y
                            offset[v, h] = max(offset[v, h], y)  # max(), not if
                    for i in range(crow[v], crow[v + 1]):
                        row = perm[i] if edge_order else i
                        for h in range(heads):
                            shifted[row, h] -= offset[v, h]
                    continue
                for i in range(crow[v], crow[v + 1]):
                    r = perm[i] if code < 0 else src[i]
                    row = perm[i] if edge_order else i
                    for h in range(heads):
                        shifted[row, h] = _logit(code, a, b, slope, r, v, h) - offset[v, h]
    return kernel


@numba.njit
def _logit(code, a, b, slope, r, v, h):  # pragma: no cover - numba; inlined, the constant code folds the branches
    """a[r, h] (code -1), else leaky_relu(a[r, h] op b[v, h], slope) for op = BINARY_OPS[code]."""
    if code < 0:
        return a[r, h]
    y = _binary(code, a[r, h], b[v, h])
    return y if y > 0 else y * slope


@specialized
def _NORMALIZED_AGGREGATE(width, num_heads):
    if 0 < width and 0 < num_heads and width * num_heads <= MAX_GENERATED_ROW:
        return load_function("normalized_aggregate", _weighted_rows_source(
            "normalized_aggregate", "ex, x, out, s", num_heads, width, neighbors="src", table="x",
            weight="ex[i, {h}]", out="out", sums="s"))

    def kernel(bounds, crow, src, ex, x, out, s):  # pragma: no cover - numba
        """s[v] = sum of ex over v's in-edges (CSR order); out[v] = sum of ex * x[src] / s[v] (0 without in-edges)."""
        heads, feats = (x.shape[1] if num_heads < 0 else num_heads), (x.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    s[v, h] = 0.0
                    for f in range(feats):
                        out[v, h, f] = 0.0
                for i in range(crow[v], crow[v + 1]):
                    if i + AHEAD < src.shape[0]:
                        prefetch_row(x, src[i + AHEAD], heads * feats)
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


def _weighted_rows_source(name: str, args: str, heads: int, feats: int, *, neighbors: str, table: str,
                          weight: str, out: str, sums: str | None = None, reads: str | None = None) -> str:
    """Source of ``name(bounds, crow, {neighbors}, {args})`` for constant widths, one scalar per accumulator
    (see ``codegen``): for each CSR row r, out[r] = sum over r's entries i of w[i, h] * table[neighbors[i], h];
    ``weight`` is w[i, h]'s expression (``{h}`` a head; n is the neighbor, ``reads`` a statement run
    before it for each entry). With ``sums``, also
    sums[r, h] = sum of w[i, h] and out[r] divided by it (0 for rows without entries)."""
    acc = [[f"a{h}_{f}" for f in range(feats)] for h in range(heads)]
    entry = [f"n = {neighbors}[i]"] + ([reads] if reads else [])
    for h in range(heads):
        entry += [f"w = {weight.format(h=h)}"] + ([f"s{h} += w"] if sums else [])
        entry += [f"{acc[h][f]} += w * {table}[n, {h}, {f}]" for f in range(feats)]
    start = [f"s{h} = zero" for h in range(heads) if sums] + [f"{a} = zero" for row in acc for a in row]
    finish = []
    for h in range(heads):
        scale = ""
        if sums:
            finish += [f"{sums}[r, {h}] = s{h}", f"inv = one / s{h} if s{h} > zero else zero"]
            scale = " * inv"
        finish += [f"{out}[r, {h}, {f}] = {acc[h][f]}{scale}" for f in range(feats)]
    lines = [
        f"def {name}(bounds, crow, {neighbors}, {args}):",
        f'    """{name} for {heads} heads of {feats} features."""',
        f"    zero, one = {table}.dtype.type(0), {table}.dtype.type(1)",
        "    for c in prange(bounds.shape[0] - 1):",
        "        for r in range(bounds[c], bounds[c + 1]):",
        *indent(start, 3),
        "            for i in range(crow[r], crow[r + 1]):",
        f"                if i + {AHEAD} < {neighbors}.shape[0]:",
        f"                    prefetch_row({table}, {neighbors}[i + {AHEAD}], {heads * feats})",
        *indent(entry, 4),
        *indent(finish, 3),
    ]
    return "\n".join(lines) + "\n"


@specialized
def _SOFTMAX_GRAD(width, num_heads):
    def kernel(bounds, crow, src, perm, ex, inv_s, x, grad, total, grad_logits):  # pragma: no cover - numba
        """grad_l[e] = alpha[e] * (d[e] - sum over v's in-edges of alpha * d), d[e] = g[v] . x[u], alpha = ex / s."""
        heads, feats = (x.shape[1] if num_heads < 0 else num_heads), (x.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for v in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    total[v, h] = 0.0
                for i in range(crow[v], crow[v + 1]):
                    if i + AHEAD < src.shape[0]:
                        prefetch_row(x, src[i + AHEAD], heads * feats)
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
def _WEIGHTED_SCATTER(width, num_heads):
    if 0 < width and 0 < num_heads and width * num_heads <= MAX_GENERATED_ROW:
        return load_function("weighted_scatter", _weighted_rows_source(
            "weighted_scatter", "perm, ex, inv_s, grad, grad_x", num_heads, width, neighbors="dst",
            table="grad", weight="ex[e, {h}] * inv_s[n, {h}]", out="grad_x", reads="e = perm[i]"))

    def kernel(bounds, crow, dst, perm, ex, inv_s, grad, grad_x):  # pragma: no cover - numba
        """grad_x[u] = sum over u's out-edges e of alpha[e] * g[dst[e]], alpha[e] = ex[e] * inv_s[dst[e]]."""
        heads, feats = (grad.shape[1] if num_heads < 0 else num_heads), (grad.shape[2] if width < 0 else width)
        for c in prange(bounds.shape[0] - 1):
            for u in range(bounds[c], bounds[c + 1]):
                for h in range(heads):
                    for f in range(feats):
                        grad_x[u, h, f] = 0.0
                for i in range(crow[u], crow[u + 1]):
                    if i + AHEAD < dst.shape[0]:
                        prefetch_row(grad, dst[i + AHEAD], heads * feats)
                    e, v = perm[i], dst[i]
                    for h in range(heads):
                        w = ex[e, h] * inv_s[v, h]
                        for f in range(feats):
                            grad_x[u, h, f] += w * grad[v, h, f]
    return kernel
