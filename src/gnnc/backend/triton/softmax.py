"""Edge softmax, and the fused softmax + aggregation (of per-edge or SDDMM logits), as Triton kernels.

Contracts: ``gnnc.backend.pytorch.edge_softmax``, ``edge_softmax_aggregate``
and ``sddmm_softmax_aggregate``. All kernels are vertex-balanced: one
program per block of CSR rows (destinations, or sources for the transposed
gradients), holding whole [H, F] rows, walking its rows' entries in step.

- ``edge_softmax``: a pass computing the per-destination max and
  denominator online, a pass writing alpha; backward the same two passes
  (t[v] = sum alpha * g, then alpha * (g - t)).
- the fused aggregation, forward: one pass over each destination's in-edges
  with online softmax (running max, rescaled denominator and weighted sum
  of x[src]); logits read per edge, or computed from node rows as
  act(a[src] op b[dst]). Only the max m and denominator s per destination
  (O(V)) are kept for backward; no [E, ...] tensor is written.
- backward, alpha = exp(logit - m[dst]) / s[dst] recomputed where needed: by
  destination, t[v] = sum of alpha * d (d[e] = g[dst] . x[src], per head)
  then the logit gradient alpha * (d - t) (written per edge for
  per-edge logits; for SDDMM logits its pre-activation gradient summed into
  b's row); by source, x's gradient sum of alpha * g[dst] and a's gradient
  from the same logit gradient, with t read back (O(V)). No atomics.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import Function

from ..pytorch.common import (
    as_heads,
    broadcast_shape,
    check_count,
    check_float,
    check_index,
    head_layout,
    heads_to_weight,
    sum_to,
    weight_as_heads,
)
from ..pytorch.csr import csr_structure
from ..pytorch.first_order import first_order
from ..pytorch.softmax import check_sddmm_softmax_aggregate, check_softmax_aggregate, keep_for_backward, kept
from .device import binary, operand_grad, operands, row_block
from .launch import check_device, edge_ids, head_tile, kernel, row_tile, scalar
from .sddmm import sddmm

# ---- device functions ------------------------------------------------------------------------------------


def _entry(
    col,
    perm,
    at,
    valid,
    h,
    h_ok,
    f,
    f_ok,
    table,
    other,
    own,
    wide,
    heads,
    feats,
    slope,
    OP: tl.constexpr,
    ACT: tl.constexpr,
    OWN: tl.constexpr,
):
    """One CSR entry per row (position ``at``, ``valid`` where the row has it), per head:
    (ok, o, e, y, logit, a, b, w) with o its column, e its edge, y = a op b the pre-activation,
    logit = act(y), and w = wide[o] ([rows, H, F]: x[src] for destination rows, g[dst] for source rows).

    OP 'edge': y = table[e, h] (a and b are y). Otherwise the row's own operand ``own`` ([rows, heads],
    loaded) is a (``OWN`` 'a': rows are sources) or b (rows are destinations), the other is read from
    ``other`` at the column: a [N_src, H] (columns sources) or b [num_dst, H] (columns destinations).
    """
    ok = valid[:, None] & h_ok[None, :]
    o = tl.load(col + at, mask=valid, other=0)
    e = tl.load(perm + at, mask=valid, other=0)
    if OP == "edge":
        y = tl.load(table + e[:, None] * heads + h[None, :], mask=ok, other=0.0)
        av = y
        bv = y
    else:
        av, bv = operands(own, tl.load(other + o[:, None] * heads + h[None, :], mask=ok, other=1.0), OWN)
        y = binary(av, bv, OP)
    if ACT:
        logit = tl.where(y > 0, y, y * slope)
    else:
        logit = y
    w = tl.load(
        wide + (o[:, None] * heads + h[None, :])[:, :, None] * feats + f[None, None, :],
        mask=ok[:, :, None] & f_ok,
        other=0.0,
    )
    return ok, o, e, y, logit, av, bv, w


def _online(m, s, logit, valid):
    """One online-softmax step: (new max, factor rescaling the old sums, exp(logit - new max)) per (row, head);
    0 where not ``valid``. A row whose logits are all -inf gets NaN weights, as exp(-inf + inf) does."""
    logit = tl.where(valid, logit, -float("inf"))
    new = tl.maximum(m, logit)
    rescale = tl.exp(tl.where(m == new, 0.0, m - new))
    p = tl.where(valid, tl.exp(logit - new), 0.0)
    return new, rescale, p


def _own_row(table, at, mask, other, OP: tl.constexpr):
    """The rows' own SDDMM operand ``table[at]`` (zeros for per-edge logits, which have none)."""
    if OP == "edge":
        row = tl.zeros(at.shape, dtype=table.dtype.element_ty)
    else:
        row = tl.load(table + at, mask=mask, other=other)
    return row


entry = kernel(_entry)
own_row = kernel(_own_row)
online = kernel(_online)


# ---- kernels ---------------------------------------------------------------------------------------------


def _softmax_rows(
    crow, perm, values, grad, out, num_rows, width, BACKWARD: tl.constexpr, BV: tl.constexpr, BD: tl.constexpr
):
    """Forward (``values`` the logits): out = alpha. Backward (``values`` alpha, ``grad`` its upstream
    gradient): out = alpha * (g - t), t the row sum of alpha * g (the difference first, as torch's softmax:
    where one edge takes nearly all the weight, alpha g - alpha t would leave the products' rounding)."""
    rows, d, row_ok, d_ok, start, deg = row_block(crow, num_rows, width, BV, BD)
    m = tl.full([BV, BD], -float("inf"), dtype=out.dtype.element_ty)
    total = tl.zeros([BV, BD], dtype=out.dtype.element_ty)
    for j in range(0, tl.max(deg)):
        valid = (j < deg)[:, None] & d_ok[None, :]
        e = tl.load(perm + start + j, mask=j < deg, other=0)
        v = tl.load(values + e[:, None] * width + d[None, :], mask=valid, other=0.0)
        if BACKWARD:
            total += tl.where(valid, v * tl.load(grad + e[:, None] * width + d[None, :], mask=valid, other=0.0), 0.0)
        else:
            m, rescale, p = online(m, total, v, valid)
            total = total * rescale + p
    for j in range(0, tl.max(deg)):
        valid = (j < deg)[:, None] & d_ok[None, :]
        e = tl.load(perm + start + j, mask=j < deg, other=0)
        at = e[:, None] * width + d[None, :]
        v = tl.load(values + at, mask=valid, other=0.0)
        if BACKWARD:
            result = v * (tl.load(grad + at, mask=valid, other=0.0) - total)
        else:
            result = tl.exp(v - m) / total
        tl.store(out + at, result, mask=valid)


def _aggregate_forward(
    crow,
    col,
    perm,
    table,
    b,
    x,
    out,
    m_out,
    s_out,
    num_rows,
    heads,
    feats,
    slope_at,
    OP: tl.constexpr,
    ACT: tl.constexpr,
    KEEP: tl.constexpr,
    BV: tl.constexpr,
    BH: tl.constexpr,
    BF: tl.constexpr,
):
    slope = tl.load(slope_at)
    rows, h, row_ok, h_ok, start, deg = row_block(crow, num_rows, heads, BV, BH)
    f = tl.arange(0, BF)
    f_ok = (f < feats)[None, None, :]
    row_heads = row_ok[:, None] & h_ok[None, :]
    own = own_row(b, rows[:, None] * heads + h[None, :], row_heads, 1.0, OP)
    m = tl.full([BV, BH], -float("inf"), dtype=out.dtype.element_ty)
    s = tl.zeros([BV, BH], dtype=out.dtype.element_ty)
    acc = tl.zeros([BV, BH, BF], dtype=out.dtype.element_ty)
    for j in range(0, tl.max(deg)):
        ok, u, e, y, logit, av, bv, xu = entry(
            col, perm, start + j, j < deg, h, h_ok, f, f_ok, table, table, own, x, heads, feats, slope, OP, ACT, "b"
        )
        m, rescale, p = online(m, s, logit, ok)
        s = s * rescale + p
        acc = acc * rescale[:, :, None] + p[:, :, None] * xu
    result = tl.where((s > 0)[:, :, None], acc / s[:, :, None], 0.0)
    tl.store(
        out + (rows[:, None] * heads + h[None, :])[:, :, None] * feats + f[None, None, :],
        result,
        mask=row_heads[:, :, None] & f_ok,
    )
    if KEEP:
        tl.store(m_out + rows[:, None] * heads + h[None, :], m, mask=row_heads)
        tl.store(s_out + rows[:, None] * heads + h[None, :], s, mask=row_heads)


def _by_destination(
    crow,
    col,
    perm,
    table,
    b,
    x,
    grad,
    m_in,
    s_in,
    t_out,
    per_edge,
    grad_b,
    num_rows,
    heads,
    feats,
    slope_at,
    OP: tl.constexpr,
    ACT: tl.constexpr,
    WRITE_EDGES: tl.constexpr,
    WITH_B: tl.constexpr,
    KEEP_T: tl.constexpr,
    BV: tl.constexpr,
    BH: tl.constexpr,
    BF: tl.constexpr,
):
    """t[v] = sum of alpha * d; then per edge the logit gradient alpha * (d - t), written (per-edge
    logits: ``WRITE_EDGES``) or, through the activation, summed into b's gradient (``WITH_B``)."""
    slope = tl.load(slope_at)
    rows, h, row_ok, h_ok, start, deg = row_block(crow, num_rows, heads, BV, BH)
    f = tl.arange(0, BF)
    f_ok = (f < feats)[None, None, :]
    row_heads = row_ok[:, None] & h_ok[None, :]
    node = rows[:, None] * heads + h[None, :]
    own = own_row(b, node, row_heads, 1.0, OP)
    m = tl.load(m_in + node, mask=row_heads, other=0.0)
    s = tl.load(s_in + node, mask=row_heads, other=1.0)
    g = tl.load(grad + node[:, :, None] * feats + f[None, None, :], mask=row_heads[:, :, None] & f_ok, other=0.0)
    t = tl.zeros([BV, BH], dtype=m.dtype)
    for j in range(0, tl.max(deg)):
        ok, u, e, y, logit, av, bv, xu = entry(
            col, perm, start + j, j < deg, h, h_ok, f, f_ok, table, table, own, x, heads, feats, slope, OP, ACT, "b"
        )
        t += tl.where(ok, tl.exp(logit - m) / s * tl.sum(g * xu, axis=2), 0.0)
    if KEEP_T:
        tl.store(t_out + node, t, mask=row_heads)
    gb = tl.zeros([BV, BH], dtype=m.dtype)
    if WRITE_EDGES or WITH_B:
        for j in range(0, tl.max(deg)):
            ok, u, e, y, logit, av, bv, xu = entry(
                col, perm, start + j, j < deg, h, h_ok, f, f_ok, table, table, own, x, heads, feats, slope, OP, ACT, "b"
            )
            alpha = tl.exp(logit - m) / s
            gl = alpha * (tl.sum(g * xu, axis=2) - t)
            if WRITE_EDGES:
                tl.store(per_edge + e[:, None] * heads + h[None, :], gl, mask=ok)
            else:
                if ACT:
                    gl = tl.where(y > 0, gl, gl * slope)
                gb += tl.where(ok, operand_grad(gl, av, bv, OP, "b"), 0.0)
    if WITH_B:
        tl.store(grad_b + node, gb, mask=row_heads)


def _by_source(
    crow,
    col,
    perm,
    table,
    b,
    x,
    grad,
    m_in,
    s_in,
    t_in,
    grad_x,
    grad_a,
    num_rows,
    heads,
    feats,
    slope_at,
    OP: tl.constexpr,
    ACT: tl.constexpr,
    WITH_X: tl.constexpr,
    WITH_A: tl.constexpr,
    BV: tl.constexpr,
    BH: tl.constexpr,
    BF: tl.constexpr,
):
    """grad_x[u] = sum over u's out-edges of alpha * g[dst]; for SDDMM logits grad_a[u] from the logit
    gradients alpha * (d - t[dst]) through the activation."""
    slope = tl.load(slope_at)
    rows, h, row_ok, h_ok, start, deg = row_block(crow, num_rows, heads, BV, BH)
    f = tl.arange(0, BF)
    f_ok = (f < feats)[None, None, :]
    row_heads = row_ok[:, None] & h_ok[None, :]
    node = rows[:, None] * heads + h[None, :]
    own = own_row(table, node, row_heads, 0.0, OP)
    if WITH_A:
        xu = tl.load(x + node[:, :, None] * feats + f[None, None, :], mask=row_heads[:, :, None] & f_ok, other=0.0)
    acc_x = tl.zeros([BV, BH, BF], dtype=x.dtype.element_ty)
    acc_a = tl.zeros([BV, BH], dtype=x.dtype.element_ty)
    for j in range(0, tl.max(deg)):
        ok, v, e, y, logit, av, bv, g = entry(
            col, perm, start + j, j < deg, h, h_ok, f, f_ok, table, b, own, grad, heads, feats, slope, OP, ACT, "a"
        )
        at = v[:, None] * heads + h[None, :]
        alpha = tl.exp(logit - tl.load(m_in + at, mask=ok, other=0.0)) / tl.load(s_in + at, mask=ok, other=1.0)
        alpha = tl.where(ok, alpha, 0.0)
        if WITH_X:
            acc_x += alpha[:, :, None] * g
        if WITH_A:
            gl = alpha * (tl.sum(g * xu, axis=2) - tl.load(t_in + at, mask=ok, other=0.0))
            if ACT:
                gl = tl.where(y > 0, gl, gl * slope)
            acc_a += tl.where(ok, operand_grad(gl, av, bv, OP, "a"), 0.0)
    if WITH_X:
        tl.store(grad_x + node[:, :, None] * feats + f[None, None, :], acc_x, mask=row_heads[:, :, None] & f_ok)
    if WITH_A:
        tl.store(grad_a + node, acc_a, mask=row_heads)


SOFTMAX_ROWS = kernel(_softmax_rows)
AGGREGATE_FORWARD = kernel(_aggregate_forward)
BY_DESTINATION = kernel(_by_destination)
BY_SOURCE = kernel(_by_source)


# ---- primitives ------------------------------------------------------------------------------------------


def edge_softmax(logits: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """alpha[e] = softmax over the in-edges of dst[e] of logits (see ``gnnc.backend.pytorch.edge_softmax``)."""
    check_float("logits", logits)
    num_nodes = check_count("num_nodes", num_nodes)
    check_index("dst", dst, num_nodes, logits.device, length=logits.shape[0])
    check_device(logits.device)
    return _EdgeSoftmax.apply(logits, dst, num_nodes)


def _softmax_pass(values: torch.Tensor, grad: torch.Tensor | None, dst: torch.Tensor, num_nodes: int):
    num_edges = values.shape[0]
    width = math.prod(values.shape[1:])
    out = torch.empty_like(values, memory_format=torch.contiguous_format)
    if out.numel():
        structure = csr_structure(dst, num_nodes)
        bv, bd = row_tile(width)
        values = values.contiguous()
        SOFTMAX_ROWS[(triton.cdiv(num_nodes, bv), triton.cdiv(width, bd))](
            structure.crow,
            edge_ids(structure.perm, num_edges),
            values,
            values if grad is None else grad.contiguous(),
            out,
            num_nodes,
            width,
            BACKWARD=grad is not None,
            BV=bv,
            BD=bd,
        )
    return out


class _EdgeSoftmax(Function):
    @staticmethod
    def forward(ctx, logits, dst, num_nodes):
        alpha = _softmax_pass(logits, None, dst, num_nodes)
        ctx.save_for_backward(alpha, dst)
        ctx.num_nodes = num_nodes
        return alpha

    @staticmethod
    @first_order
    def backward(ctx, grad):
        alpha, dst = ctx.saved_tensors
        return _softmax_pass(alpha, grad, dst, ctx.num_nodes), None, None


def edge_softmax_aggregate(
    logits: torch.Tensor,
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[v] = sum over e with dst[e] == v of edge_softmax(logits)[e] * x[src[e]]
    (see ``gnnc.backend.pytorch.edge_softmax_aggregate``); ``chunk`` is accepted and ignored."""
    logits, num_dst = check_softmax_aggregate(logits, x, src, dst, num_dst)
    check_device(x.device)
    return _SoftmaxAggregate.apply(logits, None, x, src, dst, num_dst, None, None)


def sddmm_softmax_aggregate(
    a: torch.Tensor,
    b: torch.Tensor,
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    op: str = "add",
    *,
    negative_slope: float | None = None,
    chunk: int | None = None,
    b_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """edge_softmax_aggregate(sddmm(a, src, b, b_index, op, negative_slope=negative_slope), x, src, dst, num_dst).

    Fused (logits computed in the kernels, never stored) when ``a`` and ``b`` have one feature shape
    (GAT: [N, H] and [num_dst, H] against x [N, H, F]) and ``b`` is read by destination (no
    ``b_index``); otherwise the composition of this backend's ``sddmm`` and
    ``edge_softmax_aggregate``. ``chunk`` is accepted and ignored.
    """
    logits_feat, num_dst = check_sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, op, negative_slope, b_index)
    check_device(x.device)
    if tuple(a.shape[1:]) != tuple(b.shape[1:]) or b_index is not None:
        logits = sddmm(a, src, b, dst if b_index is None else b_index, op, negative_slope=negative_slope)
        return edge_softmax_aggregate(logits, x, src, dst, num_dst)
    a, b = (t.reshape((t.shape[0],) + logits_feat) for t in (a, b))
    return _SoftmaxAggregate.apply(a, b, x, src, dst, num_dst, op, negative_slope)


class _SoftmaxAggregate(Function):
    """Softmax by destination of logits a[e] (``op`` None) or act(a[src] op b[dst]) (act: leaky_relu with
    ``slope``, or the identity for None), weighting x[src]; a / b feature shapes are the logits'."""

    @staticmethod
    def forward(ctx, a, b, x, src, dst, num_dst, op, slope):
        full = broadcast_shape(a.shape[1:], x.shape[1:])
        k = head_layout(a.shape[1:], full)
        heads_a = weight_as_heads(a, full, k).contiguous()
        heads_b = None if b is None else weight_as_heads(b, full, k).contiguous()
        heads_x = as_heads(x, full, k).contiguous()
        num_heads, num_feats = heads_x.shape[1], heads_x.shape[2]
        keep = any(ctx.needs_input_grad[:3])
        out = x.new_empty(num_dst, num_heads, num_feats)
        m = x.new_empty(num_dst, num_heads)
        s = x.new_empty(num_dst, num_heads)
        if out.numel():
            by_dst = csr_structure(dst, num_dst, src)
            _launch(
                AGGREGATE_FORWARD,
                by_dst,
                src.numel(),
                num_dst,
                heads_a,
                heads_b,
                heads_x,
                out,
                m,
                s,
                op=op,
                slope=slope,
                KEEP=keep,
            )
        if keep:
            keep_for_backward(
                ctx, heads_a, heads_b, heads_x, src, dst, m, s, None, (full, k, num_dst, op, slope), a, b, x
            )
        return out.view((num_dst,) + full)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        (
            (heads_a, heads_b, heads_x, src, dst, m, s, _),
            (full, k, num_dst, op, slope),
            (a_shape, b_shape, x_shape),
            (need_a, need_b, need_x),
        ) = kept(ctx)
        num_src, num_heads, num_feats = heads_x.shape
        grad_rows = grad.reshape(num_dst, num_heads, num_feats).contiguous()
        per_edge_logits = op is None
        ga = torch.zeros_like(heads_a) if need_a else None
        gb = torch.zeros_like(heads_b) if need_b else None
        gx = torch.zeros_like(heads_x) if need_x else None
        num_edges = src.numel()
        with_a = need_a and not per_edge_logits
        if num_edges and grad_rows.numel():
            t = m.new_empty(m.shape) if with_a else m
            if need_a or need_b:
                by_dst = csr_structure(dst, num_dst, src)
                _launch(
                    BY_DESTINATION,
                    by_dst,
                    num_edges,
                    num_dst,
                    heads_a,
                    heads_b,
                    heads_x,
                    grad_rows,
                    m,
                    s,
                    t,
                    ga if per_edge_logits and need_a else heads_a,
                    gb if need_b else m,
                    op=op,
                    slope=slope,
                    WRITE_EDGES=per_edge_logits and need_a,
                    WITH_B=need_b,
                    KEEP_T=with_a,
                )
            if need_x or with_a:
                by_src = csr_structure(src, num_src, dst)
                _launch(
                    BY_SOURCE,
                    by_src,
                    num_edges,
                    num_src,
                    heads_a,
                    heads_b,
                    heads_x,
                    grad_rows,
                    m,
                    s,
                    t,
                    heads_x if gx is None else gx,
                    ga if with_a else m,
                    op=op,
                    slope=slope,
                    WITH_X=need_x,
                    WITH_A=with_a,
                )
        grad_a = None if ga is None else heads_to_weight(ga, a_shape, full, k)
        grad_b = None if gb is None else heads_to_weight(gb, b_shape, full, k)
        grad_x = None if gx is None else sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_a, grad_b, grad_x, None, None, None, None, None


def _launch(kern, structure, num_edges: int, num_rows: int, heads_a, heads_b, heads_x, *tensors, op, slope, **flags):
    """``kern`` over the rows of CSR ``structure``, tiles of whole [H, F] rows (the table, b and x first)."""
    num_heads, num_feats = heads_x.shape[1], heads_x.shape[2]
    bv, bh, bf = head_tile(num_heads, num_feats)
    kern[(triton.cdiv(num_rows, bv),)](
        structure.crow,
        edge_ids(structure.col, num_edges),
        edge_ids(structure.perm, num_edges),
        heads_a,
        heads_a if heads_b is None else heads_b,
        heads_x,
        *tensors,
        num_rows,
        num_heads,
        num_feats,
        scalar(slope, heads_x),
        OP="edge" if op is None else op,
        ACT=slope is not None,
        BV=bv,
        BH=bh,
        BF=bf,
        **flags,
    )
