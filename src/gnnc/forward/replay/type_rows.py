"""Rows of a tensor grouped by an integer type per row: what ``X[S == c]`` and ``O[S == c] = Y`` compute,
for all types at once (``gnnc.forward.passes.type_masks`` rewrites per-type mask code into these).

A :class:`TypeLayout` lists the rows of each type ``c`` of ``S`` (a 1-D integer tensor), type after type in
the order of ``consts``, rows in ascending order within a type: a stable sort, so part ``c`` of
:func:`split_rows` is exactly ``X[S == c]``, and writing a type's rows by index is writing them by mask.
Layouts are cached by ``S``'s contents (``gnnc.graph.value_cache``: a write through ``.data`` or numpy is
seen), made outside inference mode (``gnnc.graph.inference_safe``) so that a layout first made while
evaluating serves training too. Where these shortcuts do not apply (``S`` not a 1-D integer tensor, ``X``
with another number of rows, values that do not broadcast to the rows they fill), each function computes
the masks as written, so the result, or the error, is eager's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...failures import stage
from ...graph.inference_safe import lasting
from ...graph.value_cache import ByContents

_CACHE = ByContents(16)  # S, consts -> layout
_RUN_TIME = stage("forward pass type_masks at run time")  # what a failure in a replay of the pass's code is named


@dataclass
class TypeLayout:
    """Rows of each type, concatenated (``rows``), and how many per type (``sizes``); None where the
    shortcut does not apply (``types`` and ``consts`` are kept to compute the masks as written)."""

    types: torch.Tensor
    consts: tuple
    rows: torch.Tensor | None
    sizes: list | None
    _subsets: dict = field(default_factory=dict)

    def rows_of(self, which: tuple) -> torch.Tensor:
        """The rows of the types at positions ``which``, concatenated in that order."""
        if which == tuple(range(len(self.consts))):
            return self.rows
        if which not in self._subsets:
            starts = [0]
            for size in self.sizes:
                starts.append(starts[-1] + size)
            self._subsets[which] = torch.cat([self.rows[starts[k] : starts[k + 1]] for k in which])
        return self._subsets[which]

    def mask(self, k: int) -> torch.Tensor:
        return self.types == self.consts[k]


@_RUN_TIME
def type_layout(types: torch.Tensor, consts: tuple) -> TypeLayout:
    """The layout of ``types``'s rows for the (ascending, distinct) integer ``consts``."""
    if not isinstance(types, torch.Tensor):
        return _layout(types, consts)
    layout = _CACHE.get(types, consts)
    if layout is None:
        layout = _layout(types, consts)
        _CACHE.put(types, layout, consts)
    return layout


@lasting
def _layout(types, consts) -> TypeLayout:
    if (
        not isinstance(types, torch.Tensor)
        or types.dim() != 1
        or types.dtype.is_floating_point
        or types.dtype.is_complex
        or types.dtype == torch.bool
    ):
        return TypeLayout(types, consts, None, None)
    k = len(consts)
    values = torch.tensor(consts, dtype=torch.int64, device=types.device)
    position = torch.searchsorted(values, types.to(torch.int64))
    known = (position < k) & (values[position.clamp(max=k - 1)] == types)
    slot = torch.where(known, position, k)
    order = torch.argsort(slot, stable=True)
    sizes = torch.bincount(slot, minlength=k + 1)[:k].tolist()
    return TypeLayout(types, consts, order[: sum(sizes)], sizes)


def _shortcut(t, layout: TypeLayout) -> bool:
    return (
        layout.rows is not None
        and isinstance(t, torch.Tensor)
        and t.dim() >= 1
        and t.shape[0] == layout.types.shape[0]
        and t.device == layout.types.device
    )


def _differentiated(t) -> bool:
    return torch.is_grad_enabled() and isinstance(t, torch.Tensor) and t.requires_grad


class _Gathers:
    """Parts gathered when read (a type's rows by index): nothing of ``x``'s size is copied, and without
    gradients there is no backward for one gather to save. With gradients on, a part read again is the
    first read's (a backward that saved it holds it anyway; a second gather would be saved too)."""

    def __init__(self, x: torch.Tensor, layout: TypeLayout):
        self.x, self.layout = x, layout
        self._read: dict = {}

    def __getitem__(self, k: int) -> torch.Tensor:
        if k in self._read:
            return self._read[k]
        part = self.x.index_select(0, self.layout.rows_of((k,)))
        if torch.is_grad_enabled():
            self._read[k] = part
        return part


@_RUN_TIME
def split_rows(x: torch.Tensor, layout: TypeLayout):
    """Part ``k`` is ``x[S == consts[k]]``. When ``x`` is differentiated: one gather, then views (its backward
    is one scatter, not one full-size gradient per part); otherwise each part is gathered when read."""
    if not _shortcut(x, layout):
        return tuple(x[layout.mask(k)] for k in range(len(layout.consts)))
    if _differentiated(x):
        return x.index_select(0, layout.rows).split(layout.sizes)
    return _Gathers(x, layout)


@_RUN_TIME
def write_rows(out: torch.Tensor, layout: TypeLayout, k: int, value, pending: tuple) -> tuple:
    """``out[S == consts[k]] = value``, now (into ``out``), or, for a differentiated value, later: returns the
    writes still pending, for :func:`finish_rows` to make at once (one write's backward, not one full-size
    gradient copy per write). ``out`` is one the forward allocated, read by nothing until the last write."""
    if _differentiated(value) and _shortcut(out, layout):
        return pending + ((k, value),)
    out[layout.rows_of((k,)) if _shortcut(out, layout) else layout.mask(k)] = value
    return pending


@_RUN_TIME
def finish_rows(out: torch.Tensor, layout: TypeLayout, pending: tuple) -> torch.Tensor:
    """``out`` with the pending writes of :func:`write_rows` made at once: each value copied into its type's
    rows (no concatenation of the values, which would be one more copy of ``out``'s size)."""
    if not pending:
        return out
    try:
        parts = [
            v.expand((layout.sizes[k],) + tuple(out.shape[1:]))
            for k, v in pending
            if v.dtype == out.dtype and v.device == out.device
        ]
    except RuntimeError:
        parts = []
    if len(parts) == len(pending):
        rows = tuple(layout.rows_of((k,)) for k, _ in pending)
        return _WriteRows.apply(out, rows, *parts)
    for k, v in pending:  # as written (so is any error: another dtype, a shape that does not broadcast)
        out[layout.mask(k)] = v
    return out


class _WriteRows(torch.autograd.Function):
    """``out[rows[i]] = values[i]`` for each i, in place (disjoint rows); backward: each value's gradient is
    its rows of the output's, ``out``'s is the output's with the written rows zero."""

    @staticmethod
    def forward(ctx, out, rows, *values):
        for r, v in zip(rows, values):
            out.index_copy_(0, r, v)
        ctx.mark_dirty(out)
        ctx.rows = rows
        return out

    @staticmethod
    def backward(ctx, grad):
        grads = [grad.index_select(0, r) if need else None for r, need in zip(ctx.rows, ctx.needs_input_grad[2:])]
        kept = None
        if ctx.needs_input_grad[0]:
            kept = grad.clone()
            for r in ctx.rows:
                kept.index_fill_(0, r, 0)
        return (kept, None, *grads)


__all__ = ["TypeLayout", "type_layout", "split_rows", "write_rows", "finish_rows"]
