"""Generalized SDDMM on Triton kernels, forward and backward (contract: ``gnnc.backend.pytorch.sddmm``).

Binary ops: one program per block of edges and broadcast positions writes
out[e, p] = act(a[a_index[e], pa(p)] op b[b_index[e], pb(p)]), where pa / pb
map a position of the broadcast feature shape to the operands' own (tables
of ``len(full)`` offsets: right-aligned broadcasting without expanding any
operand). Backward: per operand, one vertex-balanced pass over that
operand's rows (CSR by its index, cached), which recomputes the
pre-activation for the leaky_relu sign and sums the operand's gradient over
its edges (no atomics), at the broadcast shape, then summed to the
operand's own. Dot: the ``aggregate.edge_dot`` kernel forward, and per
operand an aggregation by its index of the other operand weighted by the
upstream gradient.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch.autograd.function import Function

from ..pytorch.common import as_heads, broadcast_shape, flat_positions, sum_to
from ..pytorch.csr import csr_structure
from ..pytorch.first_order import first_order
from ..pytorch.sddmm import check_sddmm
from .aggregate import aggregate, edge_dot
from .device import binary, operand_grad, operands, row_block
from .launch import check_device, edge_ids, kernel, row_tile, scalar


def _edges(
    a,
    a_index,
    a_off,
    a_width,
    b,
    b_index,
    b_off,
    b_width,
    out,
    num_edges,
    width,
    slope_at,
    OP: tl.constexpr,
    ACT: tl.constexpr,
    BE: tl.constexpr,
    BD: tl.constexpr,
):
    slope = tl.load(slope_at)
    edges = tl.program_id(0) * BE + tl.arange(0, BE)
    p = tl.program_id(1) * BD + tl.arange(0, BD)
    e_ok = edges < num_edges
    p_ok = p < width
    ok = e_ok[:, None] & p_ok[None, :]
    ra = tl.load(a_index + edges, mask=e_ok, other=0)
    rb = tl.load(b_index + edges, mask=e_ok, other=0)
    av = tl.load(a + ra[:, None] * a_width + tl.load(a_off + p, mask=p_ok, other=0)[None, :], mask=ok, other=0.0)
    bv = tl.load(b + rb[:, None] * b_width + tl.load(b_off + p, mask=p_ok, other=0)[None, :], mask=ok, other=1.0)
    y = binary(av, bv, OP)
    if ACT:
        y = tl.where(y > 0, y, y * slope)
    tl.store(out + edges[:, None] * width + p[None, :], y, mask=ok)


def _grads(
    crow,
    col,
    perm,
    own,
    own_off,
    own_width,
    other,
    other_off,
    other_width,
    grad,
    out,
    num_rows,
    width,
    slope_at,
    OP: tl.constexpr,
    SIDE: tl.constexpr,
    ACT: tl.constexpr,
    BV: tl.constexpr,
    BD: tl.constexpr,
):
    slope = tl.load(slope_at)
    rows, p, row_ok, p_ok, start, deg = row_block(crow, num_rows, width, BV, BD)
    mine = tl.load(
        own + rows[:, None] * own_width + tl.load(own_off + p, mask=p_ok, other=0)[None, :],
        mask=row_ok[:, None] & p_ok[None, :],
        other=1.0,
    )
    other_at = tl.load(other_off + p, mask=p_ok, other=0)[None, :]
    acc = tl.zeros([BV, BD], dtype=out.dtype.element_ty)
    for j in range(0, tl.max(deg)):
        valid = j < deg
        ok = valid[:, None] & p_ok[None, :]
        e = tl.load(perm + start + j, mask=valid, other=0)
        o = tl.load(col + start + j, mask=valid, other=0)
        theirs = tl.load(other + o[:, None] * other_width + other_at, mask=ok, other=1.0)
        g = tl.load(grad + e[:, None] * width + p[None, :], mask=ok, other=0.0)
        av, bv = operands(mine, theirs, SIDE)
        if ACT:  # leaky_relu': 1 where the pre-activation is > 0, else the slope
            g = tl.where(binary(av, bv, OP) > 0, g, g * slope)
        acc += tl.where(ok, operand_grad(g, av, bv, OP, SIDE), 0.0)
    tl.store(out + rows[:, None] * width + p[None, :], acc, mask=row_ok[:, None] & p_ok[None, :])


EDGES = kernel(_edges)
GRADS = kernel(_grads)


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
    """out[e] = a[a_index[e]] op b[b_index[e]], then leaky_relu(out, negative_slope) when it is given
    (see ``gnnc.backend.pytorch.sddmm``); ``chunk`` is accepted and ignored."""
    full = check_sddmm(a, a_index, b, b_index, op, negative_slope)
    check_device(a.device)
    if op == "dot":
        if not full:
            raise ValueError("sddmm op='dot' needs at least one feature dim in a or b")
        return _SddmmDot.apply(a, a_index, b, b_index)
    return _SddmmBinary.apply(a, a_index, b, b_index, op, negative_slope)


def _offsets(t: torch.Tensor, full) -> torch.Tensor:
    """For each position of the broadcast feature shape ``full``, its flat offset inside a row of ``t``."""
    return flat_positions(t.shape[1:], full, t.device).reshape(-1).contiguous()


class _SddmmBinary(Function):
    @staticmethod
    def forward(ctx, a, a_index, b, b_index, op, negative_slope):
        full = broadcast_shape(a.shape[1:], b.shape[1:])
        num_edges, width = a_index.numel(), math.prod(full)
        out = a.new_empty((num_edges,) + full)
        if out.numel():
            be, bd = row_tile(width)
            EDGES[(triton.cdiv(num_edges, be), triton.cdiv(width, bd))](
                a.contiguous(),
                a_index,
                _offsets(a, full),
                math.prod(a.shape[1:]),
                b.contiguous(),
                b_index,
                _offsets(b, full),
                math.prod(b.shape[1:]),
                out,
                num_edges,
                width,
                scalar(negative_slope, out),
                OP=op,
                ACT=negative_slope is not None,
                BE=be,
                BD=bd,
            )
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.layout = (full, op, negative_slope)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        a, a_index, b, b_index = ctx.saved_tensors
        full, op, negative_slope = ctx.layout
        grad = grad.contiguous()
        grad_a = (
            _operand_grad(a, a_index, b, b_index, grad, full, op, "a", negative_slope)
            if ctx.needs_input_grad[0]
            else None
        )
        grad_b = (
            _operand_grad(b, b_index, a, a_index, grad, full, op, "b", negative_slope)
            if ctx.needs_input_grad[2]
            else None
        )
        return grad_a, None, grad_b, None, None, None


def _operand_grad(own, own_index, other, other_index, grad, full, op, side, negative_slope):
    """The gradient of operand ``own`` (``side`` 'a' or 'b' of y = a op b), summed over its edges."""
    rows, width = own.shape[0], math.prod(full)
    out = own.new_empty((rows,) + full)
    if out.numel():
        num_edges = own_index.numel()
        structure = csr_structure(own_index, rows, other_index)
        bv, bd = row_tile(width)
        GRADS[(triton.cdiv(rows, bv), triton.cdiv(width, bd))](
            structure.crow,
            edge_ids(structure.col, num_edges),
            edge_ids(structure.perm, num_edges),
            own.contiguous(),
            _offsets(own, full),
            math.prod(own.shape[1:]),
            other.contiguous(),
            _offsets(other, full),
            math.prod(other.shape[1:]),
            grad if num_edges else out,
            out,
            rows,
            width,
            scalar(negative_slope, out),
            OP=op,
            SIDE=side,
            ACT=negative_slope is not None,
            BV=bv,
            BD=bd,
        )
    return sum_to(out, own.shape[1:])


class _SddmmDot(Function):
    @staticmethod
    def forward(ctx, a, a_index, b, b_index):
        full = broadcast_shape(a.shape[1:], b.shape[1:])
        k = len(full) - 1
        out = edge_dot(as_heads(a, full, k), a_index, as_heads(b, full, k), b_index)
        ctx.save_for_backward(a, a_index, b, b_index)
        ctx.full = full
        return out.view((a_index.numel(),) + full[:-1] + (1,))

    @staticmethod
    @first_order
    def backward(ctx, grad):
        a, a_index, b, b_index = ctx.saved_tensors
        full = ctx.full
        k = len(full) - 1
        grad_heads = grad.reshape(grad.shape[0], math.prod(full[:-1]))
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            ga, _ = aggregate(as_heads(b, full, k), a_index, b_index, a.shape[0], grad_heads, "mul")
            grad_a = sum_to(ga.view((a.shape[0],) + full), a.shape[1:])
        if ctx.needs_input_grad[2]:
            gb, _ = aggregate(as_heads(a, full, k), b_index, a_index, b.shape[0], grad_heads, "mul")
            grad_b = sum_to(gb.view((b.shape[0],) + full), b.shape[1:])
        return grad_a, None, grad_b, None
