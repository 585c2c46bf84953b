"""Rows of a tensor grouped by an integer type per row: what ``X[S == c]`` and ``O[S == c] = Y`` compute,
for all types at once (``gnnc.passes.type_masks`` rewrites per-type mask code into these).

A :class:`TypeLayout` lists the rows of each type ``c`` of ``S`` (a 1-D integer tensor), type after type in
the order of ``consts``, rows in ascending order within a type: a stable sort, so part ``c`` of
:func:`split_rows` is exactly ``X[S == c]``. Layouts are cached with ``S`` and its version. Where these
shortcuts do not apply (``S`` not a 1-D integer tensor, ``X`` with another number of rows, values that do not
broadcast to the rows they fill), each function computes the masks as written, so the result, or the error,
is eager's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

_CACHE: dict = {}  # (id(S), consts) -> (S, version, layout)
_MOST = 16


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
            self._subsets[which] = torch.cat([self.rows[starts[k]:starts[k + 1]] for k in which])
        return self._subsets[which]

    def mask(self, k: int) -> torch.Tensor:
        return self.types == self.consts[k]


def _version(t: torch.Tensor):
    try:
        return t._version
    except RuntimeError:  # an inference tensor has no version counter: never cached
        return None


def type_layout(types: torch.Tensor, consts: tuple) -> TypeLayout:
    """The layout of ``types``'s rows for the (ascending, distinct) integer ``consts``."""
    key = (id(types), consts)
    version = _version(types)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is types and version is not None and hit[1] == version:
        return hit[2]
    layout = _layout(types, consts)
    if version is not None:
        if len(_CACHE) >= _MOST:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (types, version, layout)
    return layout


def _layout(types, consts) -> TypeLayout:
    if not isinstance(types, torch.Tensor) or types.dim() != 1 or types.dtype.is_floating_point \
            or types.dtype.is_complex or types.dtype == torch.bool:
        return TypeLayout(types, consts, None, None)
    k = len(consts)
    values = torch.tensor(consts, dtype=torch.int64, device=types.device)
    position = torch.searchsorted(values, types.to(torch.int64))
    known = (position < k) & (values[position.clamp(max=k - 1)] == types)
    slot = torch.where(known, position, k)
    order = torch.argsort(slot, stable=True)
    sizes = torch.bincount(slot, minlength=k + 1)[:k].tolist()
    return TypeLayout(types, consts, order[:sum(sizes)], sizes)


def split_rows(x: torch.Tensor, layout: TypeLayout) -> tuple:
    """``(x[S == c] for c in consts)``: one gather, then views."""
    if layout.rows is None or not isinstance(x, torch.Tensor) or x.dim() == 0 \
            or x.shape[0] != layout.types.shape[0] or x.device != layout.types.device:
        return tuple(x[layout.mask(k)] for k in range(len(layout.consts)))
    return x.index_select(0, layout.rows).split(layout.sizes)


def fill_rows(out: torch.Tensor, layout: TypeLayout, which: tuple, values: tuple) -> torch.Tensor:
    """``out`` after ``out[S == consts[k]] = v`` for each ``k, v`` of ``which, values`` (distinct ``k``), as a
    new tensor: ``out`` is one the caller allocated and reads no more."""
    if layout.rows is not None and out.dim() >= 1 and out.shape[0] == layout.types.shape[0] \
            and out.device == layout.types.device \
            and all(not isinstance(v, torch.Tensor) or (v.dtype == out.dtype and v.device == out.device)
                    for v in values):  # item assignment by a mask refuses other dtypes: so does the loop below
        try:
            parts = [torch.as_tensor(v, dtype=out.dtype, device=out.device).expand(
                (layout.sizes[k],) + tuple(out.shape[1:])) for k, v in zip(which, values)]
        except RuntimeError:
            parts = None
        if parts is not None:
            return out.index_put((layout.rows_of(tuple(which)),), torch.cat(parts))
    for k, v in zip(which, values):  # as written (so is any error)
        out[layout.mask(k)] = v
    return out


__all__ = ["TypeLayout", "type_layout", "split_rows", "fill_rows"]
