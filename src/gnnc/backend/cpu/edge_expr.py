"""``edge_expr_aggregate`` as generated numba loops (CPU): the message's arithmetic runs inside the sum.

Forward: one loop over destinations (CSR by destination), each computing its in-edges' messages element
by element (``edge_expr_codegen``) and summing them in its output row. Backward recomputes the messages:
the same loop over destinations writes the gradients of edge operands (each edge is visited once), of
destination operands (the loop's own row) and of shared operands (a copy per thread, added up after);
a loop over sources (CSR by source) writes the gradients of source operands (its own row). Nothing of
edge size is written or saved except the gradients of edge operands themselves. Operands of another
dtype than float32 / float64, of mixed dtypes or not on the CPU run as the torch backend's composition.
Same contract as ``gnnc.backend.pytorch.edge_expr_aggregate``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch.autograd.function import Function

from ..pytorch.csr import csr_structure
from ..pytorch.edge_expr import check_edge_expr
from ..pytorch.edge_expr import edge_expr_aggregate as composed
from ..pytorch.first_order import first_order
from .codegen import generated_kernel
from .edge_expr_codegen import EdgeProgram
from .interop import as_array, empty, launch


def edge_expr_aggregate(
    program: tuple,
    kinds: tuple[str, ...],
    operands: tuple[torch.Tensor, ...],
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    reduce: str,
) -> torch.Tensor:
    """``gnnc.backend.pytorch.edge_expr_aggregate`` with the message computed inside the loop over each
    destination's in-edges."""
    check_edge_expr(program, kinds, operands, reduce)
    dtypes = {t.dtype for t in operands}
    if (
        len(dtypes) != 1
        or dtypes.pop() not in (torch.float32, torch.float64)
        or any(t.device.type != "cpu" for t in (*operands, src, dst))
    ):
        return composed(program, kinds, operands, src, dst, num_dst, reduce)
    return _EdgeExpr.apply(program, kinds, src, dst, num_dst, reduce, *operands)


# No fast math: torch rounds (and overflows) every elementwise step on its own, and the loops here
# accumulate into rows, never into scalars, so reassociation would buy no vectorization, only a
# finite value where eager has inf (or the reverse) on large inputs.
EXACT: set = set()


@functools.cache
def _plan(program: tuple, kinds: tuple[str, ...], shapes: tuple, dtype: str) -> EdgeProgram:
    return EdgeProgram(program, kinds, list(shapes), dtype)


@functools.cache
def _forward_kernel(program, kinds, shapes, dtype: str, mean: bool):
    source = _plan(program, kinds, shapes, dtype).forward_source("edge_expr_forward", mean)
    return generated_kernel("edge_expr_forward", source, EXACT)


@functools.cache
def _backward_kernel(program, kinds, shapes, dtype: str, write: frozenset, by_source: bool, init: frozenset):
    source = _plan(program, kinds, shapes, dtype).backward_source("edge_expr_backward", write, by_source, init)
    return None if source is None else generated_kernel("edge_expr_backward", source, EXACT)


def _arrays(operands, kinds) -> list[np.ndarray]:
    """The operands as the kernels read them: edge and node rows [rows, width], shared tensors flat."""
    return [
        as_array(t).reshape(-1) if k == "shared" else as_array(t).reshape(t.shape[0], math.prod(t.shape[1:]))
        for t, k in zip(operands, kinds)
    ]


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` viewed as [rows, width] (also without rows)."""
    return a.reshape(a.shape[0], math.prod(a.shape[1:]))


class _EdgeExpr(Function):
    @staticmethod
    def forward(ctx, program, kinds, src, dst, num_dst, reduce, *operands):
        shapes = tuple(check_edge_expr(program, kinds, operands, reduce))
        dtype = str(as_array(operands[0][:0]).dtype)
        out_shape = shapes[-1][1:]
        width = math.prod(out_shape)
        by_dst = csr_structure(dst, num_dst, src)
        # made in its final shape: a view returned from a custom Function cannot be written in place
        out = empty((num_dst, *out_shape), operands[0])
        launch(
            _forward_kernel(program, kinds, shapes, dtype, reduce == "mean"),
            as_array(by_dst.crow),
            src.numel() * max(width, 1),
            as_array(by_dst.col),
            as_array(by_dst.perm),
            *_arrays(operands, kinds),
            out.view(num_dst, width).numpy(),
        )
        ctx.save_for_backward(src, dst, *operands)
        ctx.layout = (program, kinds, shapes, dtype, num_dst, reduce)
        return out

    @staticmethod
    @first_order
    def backward(ctx, grad):
        src, dst, *operands = ctx.saved_tensors
        program, kinds, shapes, dtype, num_dst, reduce = ctx.layout
        needs = ctx.needs_input_grad[6:]
        grads: list = [None] * len(operands)
        if not any(needs):
            return (None,) * 6 + tuple(grads)
        width = math.prod(shapes[-1][1:])
        upstream = grad.reshape(num_dst, width)
        if reduce == "mean":
            degree = torch.bincount(dst, minlength=num_dst).clamp(min=1).to(upstream.dtype)
            upstream = upstream / degree.view(-1, 1)
        upstream_array = as_array(upstream)
        arrays = _arrays(operands, kinds)
        src_rows = max((t.shape[0] for t, k in zip(operands, kinds) if k == "src"), default=0)
        loop_rows = {"edge": src.numel(), "dst": num_dst, "src": src_rows}
        # gradients whose every row the kernels visit are zeroed there, row by row, not filled here first
        init = frozenset(
            k for k, (t, kind, n) in enumerate(zip(operands, kinds, needs)) if n and loop_rows.get(kind) == t.shape[0]
        )
        rowed = [
            None if not n or kind == "shared" else (torch.empty if k in init else torch.zeros)(t.shape, dtype=t.dtype)
            for k, (t, kind, n) in enumerate(zip(operands, kinds, needs))
        ]
        outs = [np.zeros((0, 1), dtype=dtype) if g is None else _rows(g.numpy()) for g in rowed]
        plan = _plan(program, kinds, shapes, dtype)
        plan.shared_offsets()
        partial = np.zeros(plan.partial_width, dtype=dtype)
        work = src.numel() * max(width, 1)
        for by_source in (False, True):
            write = frozenset(k for k, (kind, n) in enumerate(zip(kinds, needs)) if n and (kind == "src") == by_source)
            kernel = _backward_kernel(program, kinds, shapes, dtype, write, by_source, init & write) if write else None
            if kernel is None:
                for k in init & write:
                    rowed[k].zero_()
                continue
            if by_source:
                structure = csr_structure(src, src_rows, dst)
            else:
                structure = csr_structure(dst, num_dst, src)
            launch(
                kernel,
                as_array(structure.crow),
                work,
                as_array(structure.col),
                as_array(structure.perm),
                *arrays,
                upstream_array,
                *outs,
                partial=partial if not by_source else np.zeros(0, dtype=dtype),
            )
        offsets = plan.shared_offsets()
        for k, (t, kind, n) in enumerate(zip(operands, kinds, needs)):
            if not n:
                continue
            if kind == "shared":
                at = offsets[k]
                grads[k] = torch.from_numpy(partial[at : at + t.numel()].copy()).view(t.shape)
            else:
                grads[k] = rowed[k]
        return (None,) * 6 + tuple(grads)
