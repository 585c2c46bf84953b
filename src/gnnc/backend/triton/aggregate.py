"""The four Triton kernels behind spmm, segment_reduce and the SDDMM dot (forward and backward).

- ``rows``: out[v, d] = reduce over CSR row v of (x[col[i], d] op w[perm[i], d // F]), reduce in
  sum, mean, max, min (with the arg edge per (v, d): the first in edge order, none for NaN). One
  program per block of rows and features (vertex-balanced), which walks its rows' entries in
  step, up to the longest row of the block; no atomics.
- ``edges``: the same sum (mean: divided afterwards), edge-balanced: one program per block of
  ``bv * SPAN`` consecutive CSR entries, each lane adding up ``SPAN`` of them and each row's partial
  sum into the row with an atomic add (order-dependent in the last bits for rows spanning lanes).
  ``balance`` picks between the two per call from the CSR's degree statistics.
  Together they serve every aggregation by destination (forward) and by source (the transposed
  gradients, x's: the same rule on the CSR by source, so a hub source gets the edge kernel there).
- ``edge_dot``: out[e, h] = sum over f of A[ia[e], h, f] * B[ib[e], h, f] (or of A alone), then
  scaled: the SDDMM dot, and the edge-weight gradients of spmm. One program per block of edges.
- ``extremum_backward``: max / min gradients, each (v, d) adding into the row and the weight of
  its arg edge (atomic adds, as several destinations may share a source).

Rows are in "head form": ``x`` [rows, H * F] with weights [E, H] constant over a head's F features
(``gnnc.backend.pytorch.common.as_heads`` / ``weight_as_heads``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..pytorch.csr import csr_structure
from ..pytorch.segment import arg_dtype
from . import balance
from .device import binary, operand_grad, row_block
from .launch import edge_ids, head_tile, kernel, row_tile

OPS = ("copy", "add", "sub", "mul", "div")


def _rows(
    crow,
    col,
    perm,
    x,
    w,
    out,
    arg,
    num_rows,
    width,
    feats,
    heads,
    none,
    OP: tl.constexpr,
    REDUCE: tl.constexpr,
    WANT_ARG: tl.constexpr,
    BV: tl.constexpr,
    BD: tl.constexpr,
):
    rows, d, row_ok, d_ok, start, deg = row_block(crow, num_rows, width, BV, BD)
    acc = tl.zeros([BV, BD], dtype=x.dtype.element_ty)
    best = tl.zeros([BV, BD], dtype=tl.int64) + none
    for j in range(0, tl.max(deg)):
        valid = j < deg
        u = tl.load(col + start + j, mask=valid, other=0)
        ok = valid[:, None] & d_ok[None, :]
        msg = tl.load(x + u[:, None] * width + d[None, :], mask=ok, other=0.0)
        if OP != "copy" or WANT_ARG:
            e = tl.load(perm + start + j, mask=valid, other=0)
        if OP != "copy":
            msg = binary(msg, tl.load(w + e[:, None] * heads + (d // feats)[None, :], mask=ok, other=1.0), OP)
        if REDUCE == "sum" or REDUCE == "mean":
            acc += tl.where(ok, msg, 0.0)
        else:
            if REDUCE == "max":
                better = msg > acc
            else:
                better = msg < acc
            nan = msg != msg
            take = ok & ((j == 0) | better | nan)
            acc = tl.where(take, msg, acc)
            if WANT_ARG:
                best = tl.where(take, tl.where(nan, none, e[:, None]), best)
    if REDUCE == "mean":
        acc = acc / tl.maximum(deg, 1).to(acc.dtype)[:, None]
    ok = row_ok[:, None] & d_ok[None, :]
    tl.store(out + rows[:, None] * width + d[None, :], acc, mask=ok)
    if WANT_ARG:
        tl.store(arg + rows[:, None] * width + d[None, :], best, mask=ok)


def _edge_dot(
    a,
    ia,
    b,
    ib,
    w,
    out,
    num_edges,
    heads,
    feats,
    MODE: tl.constexpr,
    BE: tl.constexpr,
    BH: tl.constexpr,
    BF: tl.constexpr,
):
    edges = tl.program_id(0) * BE + tl.arange(0, BE)
    h = tl.arange(0, BH)
    e_ok = edges < num_edges
    eh_ok = e_ok[:, None] & (h < heads)[None, :]
    ra = tl.load(ia + edges, mask=e_ok, other=0)[:, None, None] * (heads * feats) + (h * feats)[None, :, None]
    rb = tl.load(ib + edges, mask=e_ok, other=0)[:, None, None] * (heads * feats) + (h * feats)[None, :, None]
    total = tl.zeros([BE, BH], dtype=out.dtype.element_ty)
    for f0 in range(0, feats, BF):
        f = f0 + tl.arange(0, BF)
        ok = eh_ok[:, :, None] & (f < feats)[None, None, :]
        term = tl.load(a + ra + f[None, None, :], mask=ok, other=0.0)
        if MODE != "sum" and MODE != "neg_sum":
            term = term * tl.load(b + rb + f[None, None, :], mask=ok, other=0.0)
        total += tl.sum(term, axis=2)
    if MODE == "neg_sum":
        total = -total
    if MODE == "div":  # d(x / w)/dw = -x / w^2
        wv = tl.load(w + edges[:, None] * heads + h[None, :], mask=eh_ok, other=1.0)
        total = -total / (wv * wv)
    tl.store(out + edges[:, None] * heads + h[None, :], total, mask=eh_ok)


def _extremum_backward(
    arg,
    grad,
    src,
    x,
    w,
    grad_x,
    grad_w,
    num_rows,
    width,
    feats,
    heads,
    none,
    OP: tl.constexpr,
    WITH_X: tl.constexpr,
    WITH_W: tl.constexpr,
    SRC_IS_EDGE: tl.constexpr,
    BV: tl.constexpr,
    BD: tl.constexpr,
):
    rows = tl.program_id(0) * BV + tl.arange(0, BV)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    at = rows[:, None] * width + d[None, :]
    e = tl.load(arg + at, mask=(rows < num_rows)[:, None] & (d < width)[None, :], other=none).to(tl.int64)
    ok = e != none
    e = tl.where(ok, e, 0)
    g = tl.load(grad + at, mask=ok, other=0.0)
    if SRC_IS_EDGE:
        u = e
    else:
        u = tl.load(src + e, mask=ok, other=0)
    x_at = u * width + d[None, :]
    w_at = e * heads + (d // feats)[None, :]
    xv = tl.load(x + x_at, mask=ok, other=0.0)
    if OP == "copy":
        wv = xv
    else:
        wv = tl.load(w + w_at, mask=ok, other=1.0)
    if WITH_X:
        tl.atomic_add(grad_x + x_at, operand_grad(g, xv, wv, OP, "a"), mask=ok)
    if WITH_W:
        tl.atomic_add(grad_w + w_at, operand_grad(g, xv, wv, OP, "b"), mask=ok)


def _edges(
    row_of,
    col,
    perm,
    x,
    w,
    out,
    num_edges,
    width,
    feats,
    heads,
    OP: tl.constexpr,
    BV: tl.constexpr,
    BD: tl.constexpr,
    SPAN: tl.constexpr,
):
    lanes = tl.program_id(0) * BV + tl.arange(0, BV)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    d_ok = d < width
    first = lanes * SPAN
    row = tl.load(row_of + first, mask=first < num_edges, other=0)
    acc = tl.zeros([BV, BD], dtype=x.dtype.element_ty)
    for j in range(0, SPAN):
        at = first + j
        valid = at < num_edges
        r = tl.load(row_of + at, mask=valid, other=0)
        new = valid & (r != row)  # the lane's row ends: add its sum in, start the next row's
        tl.atomic_add(out + row[:, None] * width + d[None, :], acc, mask=new[:, None] & d_ok[None, :], sem="relaxed")
        acc = tl.where(new[:, None], 0.0, acc)
        row = tl.where(new, r, row)
        ok = valid[:, None] & d_ok[None, :]
        u = tl.load(col + at, mask=valid, other=0)
        msg = tl.load(x + u[:, None] * width + d[None, :], mask=ok, other=0.0)
        if OP != "copy":
            e = tl.load(perm + at, mask=valid, other=0)
            msg = binary(msg, tl.load(w + e[:, None] * heads + (d // feats)[None, :], mask=ok, other=1.0), OP)
        acc += tl.where(ok, msg, 0.0)
    tl.atomic_add(
        out + row[:, None] * width + d[None, :], acc, mask=(first < num_edges)[:, None] & d_ok[None, :], sem="relaxed"
    )


ROWS = kernel(_rows)
EDGES = kernel(_edges)
EDGE_DOT = kernel(_edge_dot)
EXTREMUM_BACKWARD = kernel(_extremum_backward)


def aggregate(
    x: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor | None,
    num_rows: int,
    weight: torch.Tensor | None,
    op: str = "copy",
    reduce: str = "sum",
    want_arg: bool = False,
):
    """out[r, h, f] = reduce over e with rows[e] == r of (x[cols[e], h, f] op weight[e, h]) and, for max / min
    with ``want_arg``, the arg edge per (r, h, f) (E where none; int32 when E fits), else None.

    ``x`` [C, H, F] (``cols`` None: ``cols[e] = e``), ``weight`` [E, H] or None (op 'copy'); 0 for empty rows.
    """
    num_edges = rows.numel()
    heads, feats = x.shape[1], x.shape[2]
    width = heads * feats
    out = x.new_empty(num_rows, heads, feats)
    arg = torch.empty((num_rows, heads, feats), dtype=arg_dtype(num_edges), device=x.device) if want_arg else None
    if out.numel() == 0:
        return out, arg
    structure = csr_structure(rows, num_rows, cols)
    bv, bd = row_tile(width)
    x_rows = x.contiguous() if x.numel() else x.new_zeros(1)
    w = x_rows if weight is None else weight.contiguous()
    if reduce in ("sum", "mean") and balance.edge_balanced(structure, bv):
        out.zero_()
        span = balance.SPAN
        EDGES[(triton.cdiv(num_edges, bv * span), triton.cdiv(width, bd))](
            balance.entry_rows(structure),
            structure.col,
            structure.perm,
            x_rows,
            w,
            out,
            num_edges,
            width,
            max(feats, 1),
            heads,
            OP=op,
            BV=bv,
            BD=bd,
            SPAN=span,
        )
        if reduce == "mean":
            out /= structure.crow.diff().clamp(min=1).to(out.dtype)[:, None, None]
        return out, arg
    grid = (triton.cdiv(num_rows, bv), triton.cdiv(width, bd))
    ROWS[grid](
        structure.crow,
        edge_ids(structure.col, num_edges),
        edge_ids(structure.perm, num_edges),
        x_rows,
        w,
        out,
        out if arg is None else arg,
        num_rows,
        width,
        max(feats, 1),
        heads,
        num_edges,
        OP=op,
        REDUCE=reduce,
        WANT_ARG=want_arg,
        BV=bv,
        BD=bd,
    )
    return out, arg


def edge_dot(
    a: torch.Tensor,
    a_index: torch.Tensor,
    b: torch.Tensor | None,
    b_index: torch.Tensor,
    mode: str = "dot",
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """out[e, h] = sum over f of a[a_index[e], h, f] * b[b_index[e], h, f] for ``a``, ``b`` [rows, H, F].

    ``mode``: 'dot'; 'sum' / 'neg_sum' (plus / minus the sum of a's row alone, ``b`` unused); 'div'
    (minus the dot divided by weight[e, h] squared, the weight gradient of x / w).
    """
    num_edges, heads, feats = a_index.numel(), a.shape[1], a.shape[2]
    out = a.new_zeros(num_edges, heads)
    if out.numel() == 0 or feats == 0:
        return out
    be, bh, bf = head_tile(heads, min(feats, 64))
    a_rows = a.contiguous()
    b_rows = a_rows if b is None else b.contiguous()
    EDGE_DOT[(triton.cdiv(num_edges, be),)](
        a_rows,
        a_index,
        b_rows,
        b_index,
        out if weight is None else weight.contiguous(),
        out,
        num_edges,
        heads,
        feats,
        MODE=mode,
        BE=be,
        BH=bh,
        BF=bf,
    )
    return out


def extremum_backward(
    arg: torch.Tensor,
    grad: torch.Tensor,
    src: torch.Tensor | None,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    op: str,
    with_x: bool,
    with_w: bool,
):
    """Gradients of a max / min aggregation in head form: (grad_x [C, H, F] or None, grad_w [E, H] or None).

    ``arg`` [N, H, F] the arg edges (E: none), ``grad`` [N, H, F]; ``src`` None means rows of ``x`` are
    edges (segment_reduce).
    """
    num_edges = weight.shape[0] if weight is not None else (x.shape[0] if src is None else src.numel())
    grad_x = torch.zeros_like(x) if with_x else None
    grad_w = torch.zeros_like(weight) if with_w else None
    rows, heads, feats = arg.shape
    width = heads * feats
    if arg.numel() == 0 or num_edges == 0 or not (with_x or with_w):
        return grad_x, grad_w
    bv, bd = row_tile(width)
    x_rows = x.contiguous()
    w = x_rows if weight is None else weight.contiguous()
    EXTREMUM_BACKWARD[(triton.cdiv(rows, bv), triton.cdiv(width, bd))](
        arg,
        grad.contiguous(),
        x_rows if src is None else src,
        x_rows,
        w,
        x_rows if grad_x is None else grad_x,
        w if grad_w is None else grad_w,
        rows,
        width,
        max(feats, 1),
        heads,
        num_edges,
        OP=op,
        WITH_X=with_x,
        WITH_W=with_w,
        SRC_IS_EDGE=src is None,
        BV=bv,
        BD=bd,
    )
    return grad_x, grad_w
