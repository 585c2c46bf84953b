"""Typed linear layers whose type comes from an integer feature: rows grouped by a run-time index.

``weight[edges.data['rel_type']]`` followed by a per-row matmul is a typed
linear layer whose types are data, not graph structure. The kernel sorts the
rows stably by type once (cached, see ``grouping``), then runs one matmul per
type over the rows of that type, gathered on the fly; no [E, K, M] per-row
weight copy exists, forward or backward.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property

import torch
from torch.autograd.function import Function, once_differentiable

from .common import (CPU_CHUNK_ELEMENTS, DEVICE_CHUNK_ELEMENTS, check_float, check_index, check_same, chunk_rows,
                     tensor_identity)

INDEX_DTYPES = (torch.int64, torch.int32)
CACHE_SIZE = 8


@dataclass(eq=False)
class Grouping:
    """Rows sorted stably by type: ``perm[i]`` is the row at sorted position ``i``; rows of type t
    are sorted positions ``offsets[t]`` .. ``offsets[t+1]``. ``identity``: the rows already were
    in type order (``perm`` is 0..n-1)."""

    snapshot: torch.Tensor  # a copy of the type tensor it was built from, to recognise equal contents
    num_types: int
    perm: torch.Tensor
    offsets: tuple[int, ...]
    identity: bool
    sorted_rows: OrderedDict = field(default_factory=OrderedDict)  # identity of a row index -> (index, index[perm])
    plans: dict = field(default_factory=dict)  # (row width, device type, chunk) -> chunk plan (see ``_plan``)

    @cached_property
    def inverse(self) -> torch.Tensor:
        """Sorted position of every row: ``perm[inverse[i]] == i``."""
        inv = torch.empty_like(self.perm)
        inv[self.perm] = torch.arange(self.perm.numel(), device=self.perm.device)
        return inv

    def segments(self):
        """(type, lo, hi) of every non-empty group."""
        return [(t, lo, hi) for t, (lo, hi) in enumerate(zip(self.offsets, self.offsets[1:])) if hi > lo]

    def rows(self, index: torch.Tensor | None) -> torch.Tensor | None:
        """``index[perm]`` (cached per index tensor); None when ``index`` is None and rows are in order."""
        if index is None:
            return None if self.identity else self.perm
        if self.identity:
            return index
        key = tensor_identity(index)
        if key is not None and key in self.sorted_rows:
            self.sorted_rows.move_to_end(key)
            return self.sorted_rows[key][1]
        rows = index.index_select(0, self.perm)
        if key is not None:
            self.sorted_rows[key] = (index, rows)  # holding index pins the data pointer of the key
            while len(self.sorted_rows) > 4:
                self.sorted_rows.popitem(last=False)
        return rows


# id(types) -> (weak reference to types, its version, Grouping): the same tensor object, unchanged
_by_object: OrderedDict = OrderedDict()
# the last CACHE_SIZE groupings, matched by contents (a plan may get a fresh, equal index every call)
_recent: OrderedDict = OrderedDict()


def clear_groupings() -> None:
    """Forget every cached grouping."""
    _by_object.clear()
    _recent.clear()


def _version(t: torch.Tensor):
    return None if t.is_inference() else t._version


def grouping(types: torch.Tensor, num_types: int, name: str = "types") -> Grouping:
    """The stable sort of ``types`` (values in [-num_types, num_types), negatives counted from the end
    as indexing does), cached: by the tensor object and its version counter (an in-place change or a
    new tensor is seen), else by equal contents. IndexError naming ``name`` for a value out of range."""
    version = _version(types)
    entry = _by_object.get(id(types))
    if entry is not None and version is not None and entry[0]() is types and entry[1] == version \
            and entry[2].num_types == num_types:
        _by_object.move_to_end(id(types))
        return entry[2]
    found = None
    for gp in reversed(_recent.values()):
        if gp.num_types == num_types and gp.snapshot.dtype == types.dtype and gp.snapshot.device == types.device \
                and gp.snapshot.shape == types.shape and torch.equal(gp.snapshot, types):
            found = gp
            break
    if found is None:
        found = _build(types, num_types, name)
    _recent[id(found)] = found
    _recent.move_to_end(id(found))
    while len(_recent) > CACHE_SIZE:
        _recent.popitem(last=False)
    if version is not None:
        _by_object[id(types)] = (weakref.ref(types), version, found)
        _by_object.move_to_end(id(types))
        while len(_by_object) > 4 * CACHE_SIZE:
            _by_object.popitem(last=False)
    return found


def _build(types: torch.Tensor, num_types: int, name: str) -> Grouping:
    t = types.to(torch.int64)
    n = t.numel()
    if n:
        lo, hi = (int(v) for v in torch.aminmax(t))
        if lo < -num_types or hi >= num_types:
            raise IndexError(f"{name} has values in [{lo}, {hi}] but indexes a weight of {num_types} rows "
                             f"(valid: 0 .. {num_types - 1}, or -{num_types} .. -1 from the end)")
        if lo < 0:
            t = torch.where(t < 0, t + num_types, t)
    in_order = bool((t[1:] >= t[:-1]).all()) if n > 1 else True
    perm = torch.arange(n, device=t.device) if in_order else torch.sort(t, stable=True).indices
    counts = torch.bincount(t, minlength=num_types) if n else torch.zeros(num_types, dtype=torch.int64)
    offsets = (0,) + tuple(int(c) for c in torch.cumsum(counts, 0).tolist())
    return Grouping(types.detach().clone(), num_types, perm, offsets, in_order)


def typed_index_matmul(x: torch.Tensor, index: torch.Tensor | None, weight: torch.Tensor, types: torch.Tensor, *,
                       name: str = "types", chunk: int | None = None) -> torch.Tensor:
    """out[e] = x[index[e]] @ weight[types[e]] (``index`` None: x[e] @ weight[types[e]]).

    ``x`` [N, K]; ``index`` [E] int64 or None (then E = N); ``weight`` [T, K, M];
    ``types`` [E] int64/int32 with values in [-T, T) (negative: from the end).
    Rows are grouped by type with a cached stable sort (``grouping``); one
    matmul per type over gathered rows, in chunks, so neither an [E, K, M]
    weight copy nor an [E, K] gather exists. Backward: grad x by the
    transposed products (scattered back through ``index``), grad weight[t] =
    x_t^T g_t per type.
    """
    check_float("x", x, min_dim=2)
    if x.dim() != 2:
        raise ValueError(f"x must be [N, K], got shape {tuple(x.shape)}")
    check_float("weight", weight, min_dim=3)
    check_same(x.device, x.dtype, weight=weight)
    if weight.dim() != 3 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight must be [T, K, M] with K = {x.shape[1]} (x columns), got {tuple(weight.shape)}")
    if not isinstance(types, torch.Tensor) or types.dtype not in INDEX_DTYPES or types.dim() != 1:
        raise TypeError(f"{name} must be a 1-D int64 or int32 tensor, got "
                        f"{getattr(types, 'dtype', type(types).__name__)} {tuple(getattr(types, 'shape', ()))}")
    if types.device != x.device:
        raise ValueError(f"{name} is on {types.device}, expected {x.device}")
    if index is None:
        if types.numel() != x.shape[0]:
            raise ValueError(f"{name} has {types.numel()} entries, expected one per row of x ({x.shape[0]})")
    else:
        check_index("index", index, x.shape[0], x.device, length=types.numel())
    gp = grouping(types, weight.shape[0], name)
    return _TypedIndexMatmul.apply(x, weight, gp, index, chunk)


def _rows_per_chunk(width: int, device, chunk) -> int:
    if chunk is not None:
        return chunk  # validated by chunk_rows
    budget = CPU_CHUNK_ELEMENTS if device.type == "cpu" else DEVICE_CHUNK_ELEMENTS
    return max(1, budget // max(1, width))


def _plan(gp: Grouping, width: int, device, chunk):
    """Chunks of sorted positions, each ``(s, e, pieces)`` with pieces ``(type, lo, hi)`` tiling [s, e): whole
    groups packed together up to the element budget (one gather per chunk, one matmul per piece), a group
    larger than the budget split over several chunks."""
    key = (width, device.type, chunk)
    if key in gp.plans:
        return gp.plans[key]
    chunk_rows(0, width, device, chunk)  # validates ``chunk``
    limit = _rows_per_chunk(width, device, chunk)
    chunks, pieces, start = [], [], 0
    for t, lo, hi in gp.segments():
        for s, e in chunk_rows(hi - lo, width, device, limit):
            if pieces and lo + e - start > limit:
                chunks.append((start, lo + s, pieces))
                pieces, start = [], lo + s
            pieces.append((t, lo + s, lo + e))
    if pieces:
        chunks.append((start, pieces[-1][2], pieces))
    gp.plans[key] = chunks
    return chunks


class _TypedIndexMatmul(Function):
    @staticmethod
    def forward(ctx, x, weight, gp, index, chunk):
        rows = gp.rows(index)
        # products in sorted order, then one gather back to row order (a scatter, index_copy_, measured
        # several times slower on CPU than index_select)
        out = x.new_empty(gp.perm.numel(), weight.shape[2])
        for s, e, pieces in _plan(gp, x.shape[1], x.device, chunk):
            xs = x[s:e] if rows is None else x.index_select(0, rows[s:e])
            for t, lo, hi in pieces:
                torch.mm(xs[lo - s:hi - s], weight[t], out=out[lo:hi])
        ctx.save_for_backward(x, weight)
        ctx.layout = (gp, index, rows, chunk)
        return out if gp.identity else out.index_select(0, gp.inverse)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        gp, index, rows, chunk = ctx.layout
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_x = None
        if need_x:
            grad_x = x.new_empty(x.shape) if index is None else torch.zeros_like(x)
        for s, e, pieces in _plan(gp, max(x.shape[1], weight.shape[2]), x.device, chunk):
            g = grad[s:e] if gp.identity else grad.index_select(0, gp.perm[s:e])  # this chunk, sorted
            xs = None
            if need_w:
                xs = x[s:e] if rows is None else x.index_select(0, rows[s:e])
            gx = None
            if need_x:
                gx = grad_x[s:e] if index is None else x.new_empty(e - s, x.shape[1])
            for t, lo, hi in pieces:
                if need_x:
                    torch.mm(g[lo - s:hi - s], weight[t].t(), out=gx[lo - s:hi - s])
                if need_w:
                    grad_w[t].addmm_(xs[lo - s:hi - s].t(), g[lo - s:hi - s])
            if need_x and index is not None:
                grad_x.index_add_(0, rows[s:e], gx)
        if need_x and index is None and not gp.identity:  # grad_x was filled in sorted order
            grad_x = grad_x.index_select(0, gp.inverse)
        return grad_x, grad_w, None, None, None
