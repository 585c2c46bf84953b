"""Typed linear layers whose type comes from an integer feature: rows grouped by a run-time index.

``weight[edges.data['rel_type']]`` followed by a per-row matmul is a typed
linear layer whose types are data, not graph structure. The rows are sorted
stably by type once (cached, see ``grouping``), then one matmul runs per type
over the rows of that type; no [E, K, M] per-row weight copy exists, forward
or backward. A gathered operand (``x[src[e]] @ W[types[e]]``) is computed once
per distinct (row, type) pair and gathered to the edges (Hector's compact
materialization): with fewer pairs than edges, fewer rows are multiplied,
read and written.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import cached_property

import torch
from torch.autograd.function import Function

from ...bounded_cache import BoundedCache
from ...stage_timings import timed
from .common import (
    CPU_CHUNK_ELEMENTS,
    DEVICE_CHUNK_ELEMENTS,
    check_float,
    check_index,
    check_same,
    chunk_rows,
    tensor_identity,
)
from .first_order import first_order

INDEX_DTYPES = (torch.int64, torch.int32)
CACHE_SIZE = 8


@dataclass(eq=False)
class Segments:
    """Positions grouped by type: type t holds positions ``offsets[t]`` .. ``offsets[t+1]``; ``plans``
    caches their chunkings (see ``_plan``)."""

    offsets: tuple[int, ...]
    plans: dict = field(default_factory=dict)  # (row width, device type, chunk) -> chunks

    def segments(self):
        """(type, lo, hi) of every non-empty group."""
        return [(t, lo, hi) for t, (lo, hi) in enumerate(zip(self.offsets, self.offsets[1:])) if hi > lo]


@dataclass(eq=False)
class Compact:
    """The distinct (row, type) pairs of a gather ``x[index[e]] @ W[types[e]]``: pair p reads row
    ``rows[p]``; pairs are sorted by type (``groups``); edge e's product is pair ``pair[e]``'s."""

    rows: torch.Tensor
    pair: torch.Tensor
    groups: Segments


def _offsets(types: torch.Tensor, num_types: int) -> tuple[int, ...]:
    counts = torch.bincount(types, minlength=num_types) if types.numel() else torch.zeros(num_types, dtype=torch.int64)
    return (0,) + tuple(int(c) for c in torch.cumsum(counts, 0).tolist())


@dataclass(eq=False)
class Grouping:
    """Rows sorted stably by type: ``perm[i]`` is the row at sorted position ``i``; rows of type t
    are sorted positions ``groups.offsets[t]`` .. ``groups.offsets[t+1]``. ``identity``: the rows already
    were in type order (``perm`` is 0..n-1)."""

    snapshot: torch.Tensor  # the type tensor it was built from, in the narrowest integer dtype (_narrowed)
    num_types: int
    source_dtype: torch.dtype  # the type tensor's own dtype
    perm: torch.Tensor
    groups: Segments
    identity: bool
    # (identity of an index, rows) -> (index, Compact)
    compacts: BoundedCache[tuple] = field(default_factory=lambda: BoundedCache(4))

    @cached_property
    def inverse(self) -> torch.Tensor:
        """Sorted position of every row: ``perm[inverse[i]] == i``."""
        inv = torch.empty_like(self.perm)
        inv[self.perm] = torch.arange(self.perm.numel(), device=self.perm.device)
        return inv

    def compact(self, index: torch.Tensor, num_rows: int) -> Compact:
        """The distinct (index[e], type[e]) pairs, ``index`` values in [0, num_rows) (cached per index tensor)."""
        key = tensor_identity(index)
        key = None if key is None else key + (num_rows,)
        hit = None if key is None else self.compacts.get(key)
        if hit is not None:
            return hit[1]
        with timed("graph preparation"):
            t = self.snapshot.to(torch.int64)
            t = torch.where(t < 0, t + self.num_types, t)
            pairs, pair = torch.unique(t * num_rows + index.to(torch.int64), return_inverse=True)  # sorted: by type
            found = Compact(pairs % num_rows, pair, Segments(_offsets(pairs // num_rows, self.num_types)))
        if key is not None:
            self.compacts.put(key, (index, found))  # holding index pins the data pointer of the key
        return found


# the last CACHE_SIZE groupings, matched by contents (a version counter misses writes through ``.data`` or
# numpy; a plan may get a fresh, equal index every call)
_recent: BoundedCache[Grouping] = BoundedCache(CACHE_SIZE)
# Type tensors only gnnc holds (``mark_private``): id -> (weak reference, version, Grouping or None)
_private: dict = {}


def clear_groupings() -> None:
    """Forget every cached grouping."""
    _recent.clear()
    for key, (ref, _, _) in list(_private.items()):
        _private[key] = (ref, None, None)


def mark_private(types: torch.Tensor) -> None:
    """Declare ``types`` a tensor that only gnnc holds and nothing writes but torch (an edge feature's copy in
    internal edge order): its grouping is then also kept by the object and its version, with no comparison."""
    key = id(types)
    _private[key] = (weakref.ref(types, lambda _: _private.pop(key, None)), None, None)


def grouping(types: torch.Tensor, num_types: int, name: str = "types") -> Grouping:
    """The stable sort of ``types`` (values in [-num_types, num_types), negatives counted from the end
    as indexing does), cached by equal contents (any change of the tensor, or a new tensor, is seen), and by
    the object for a tensor gnnc marked private. IndexError naming ``name`` for a value out of range."""
    mine = _private.get(id(types))
    if mine is not None and (mine[0]() is not types or types.is_inference()):
        mine = None
    if mine is not None and mine[1] == types._version and mine[2] is not None and mine[2].num_types == num_types:
        return mine[2]
    found = None
    for gp in reversed(_recent.values()):
        if (
            gp.num_types == num_types
            and gp.source_dtype == types.dtype
            and gp.snapshot.device == types.device
            and gp.snapshot.shape == types.shape
            and _same_contents(gp, types)
        ):
            found = gp
            break
    if found is None:
        with timed("graph preparation"):
            found = _build(types, num_types, name)
    _recent.put(id(found), found)
    if mine is not None:
        _private[id(types)] = (mine[0], types._version, found)
    return found


def _build(types: torch.Tensor, num_types: int, name: str) -> Grouping:
    t = types.to(torch.int64)
    n = t.numel()
    if n:
        lo, hi = (int(v) for v in torch.aminmax(t))
        if lo < -num_types or hi >= num_types:
            raise IndexError(
                f"{name} has values in [{lo}, {hi}] but indexes a weight of {num_types} rows "
                f"(valid: 0 .. {num_types - 1}, or -{num_types} .. -1 from the end)"
            )
        if lo < 0:
            t = torch.where(t < 0, t + num_types, t)
    in_order = bool((t[1:] >= t[:-1]).all()) if n > 1 else True
    perm = torch.arange(n, device=t.device) if in_order else torch.sort(t, stable=True).indices
    return Grouping(
        _narrowed(types.detach(), num_types), num_types, types.dtype, perm, Segments(_offsets(t, num_types)), in_order
    )


def _narrow_dtype(dtype: torch.dtype, num_types: int) -> torch.dtype:
    """The smallest signed integer dtype holding [-num_types, num_types) for an integer ``dtype`` (a float
    or bool one is kept as is)."""
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return dtype
    for narrow in (torch.int8, torch.int16, torch.int32):
        if num_types <= -torch.iinfo(narrow).min:
            return narrow
    return torch.int64


def _narrowed(types: torch.Tensor, num_types: int) -> torch.Tensor:
    """A copy of ``types`` (values already checked in [-num_types, num_types)) in ``_narrow_dtype``: exact,
    and as little as an eighth of an int64 copy."""
    return types.to(_narrow_dtype(types.dtype, num_types), copy=True)


def _same_contents(gp: Grouping, types: torch.Tensor) -> bool:
    """Whether ``types`` (of ``gp``'s source dtype and shape) holds the values ``gp`` was built from. Values
    outside [-num_types, num_types) differ from all of them, whatever they become when narrowed."""
    if gp.snapshot.dtype == types.dtype:
        return torch.equal(gp.snapshot, types)
    if types.numel():
        lo, hi = (int(v) for v in torch.aminmax(types))
        if lo < -gp.num_types or hi >= gp.num_types:
            return False
    return torch.equal(gp.snapshot, types.to(gp.snapshot.dtype))


def typed_index_matmul(
    x: torch.Tensor,
    index: torch.Tensor | None,
    weight: torch.Tensor,
    types: torch.Tensor,
    *,
    name: str = "types",
    chunk: int | None = None,
) -> torch.Tensor:
    """out[e] = x[index[e]] @ weight[types[e]] (``index`` None: x[e] @ weight[types[e]]), per head.

    ``x`` [N, *B, K]; ``index`` [E] int64 or None (then E = N); ``weight``
    [T, *B, K, M] (``B`` head dims, HGT's per-relation, per-head matrices;
    none for an RGCN weight); ``types`` [E] int64/int32 with values in
    [-T, T) (negative: from the end); out [E, *B, M]. Rows are grouped by
    type with a cached stable sort (``grouping``); one (batched over heads)
    matmul per type over gathered rows, in chunks, so neither an
    [E, *B, K, M] weight copy nor an [E, *B, K] gather exists. Backward: grad
    x by the transposed products (scattered back through ``index``), grad
    weight[t] = x_t^T g_t per type and head.
    """
    check_float("x", x, min_dim=2)
    check_float("weight", weight, min_dim=3)
    check_same(x.device, x.dtype, weight=weight)
    heads = tuple(x.shape[1:-1])
    if weight.dim() != x.dim() + 1 or tuple(weight.shape[1:-1]) != heads + (x.shape[-1],):
        raise ValueError(f"weight must be [T, *B, K, M] for x [N, *B, K] = {tuple(x.shape)}, got {tuple(weight.shape)}")
    if not isinstance(types, torch.Tensor) or types.dtype not in INDEX_DTYPES or types.dim() != 1:
        raise TypeError(
            f"{name} must be a 1-D int64 or int32 tensor, got "
            f"{getattr(types, 'dtype', type(types).__name__)} {tuple(getattr(types, 'shape', ()))}"
        )
    if types.device != x.device:
        raise ValueError(f"{name} is on {types.device}, expected {x.device}")
    if index is None:
        if types.numel() != x.shape[0]:
            raise ValueError(f"{name} has {types.numel()} entries, expected one per row of x ({x.shape[0]})")
    else:
        check_index("index", index, x.shape[0], x.device, length=types.numel())
    gp = grouping(types, weight.shape[0], name)
    t, k, m = weight.shape[0], x.shape[-1], weight.shape[-1]
    b = math.prod(heads)
    out = _TypedIndexMatmul.apply(x.reshape(x.shape[0], b, k), weight.reshape(t, b, k, m), gp, index, chunk)
    return out.view((out.shape[0],) + heads + (m,))


def _rows_per_chunk(width: int, device, chunk) -> int:
    if chunk is not None:
        return chunk  # validated by chunk_rows
    budget = CPU_CHUNK_ELEMENTS if device.type == "cpu" else DEVICE_CHUNK_ELEMENTS
    return max(1, budget // max(1, width))


def _plan(groups: Segments, width: int, device, chunk):
    """Chunks of grouped positions, each ``(s, e, pieces)`` with pieces ``(type, lo, hi)`` tiling [s, e): whole
    groups packed together up to the element budget (one gather per chunk, one matmul per piece), a group
    larger than the budget split over several chunks."""
    key = (width, device.type, chunk)
    if key in groups.plans:
        return groups.plans[key]
    chunk_rows(0, width, device, chunk)  # validates ``chunk``
    limit = _rows_per_chunk(width, device, chunk)
    chunks, pieces, start = [], [], 0
    for t, lo, hi in groups.segments():
        for s, e in chunk_rows(hi - lo, width, device, limit):
            if pieces and lo + e - start > limit:
                chunks.append((start, lo + s, pieces))
                pieces, start = [], lo + s
            pieces.append((t, lo + s, lo + e))
    if pieces:
        chunks.append((start, pieces[-1][2], pieces))
    groups.plans[key] = chunks
    return chunks


class _TypedIndexMatmul(Function):
    """x [N, B, K], weight [T, B, K, M] -> [E, B, M]. Rows of edge data (no index) are multiplied in type
    order and put back in row order; a gather is multiplied once per distinct (row, type) pair."""

    @staticmethod
    def forward(ctx, x, weight, gp, index, chunk):
        b, k, m = weight.shape[1:]
        if index is None:
            groups, rows, count, pair = gp.groups, None if gp.identity else gp.perm, gp.perm.numel(), None
        else:
            compact = gp.compact(index, x.shape[0])
            groups, rows, count, pair = compact.groups, compact.rows, compact.rows.numel(), compact.pair
        products = x.new_empty(count, b, m)
        for s, e, pieces in _plan(groups, b * k, x.device, chunk):
            xs = x[s:e] if rows is None else x.index_select(0, rows[s:e])
            for t, lo, hi in pieces:
                _product(xs[lo - s : hi - s], weight[t], products[lo:hi])
        ctx.save_for_backward(x, weight)
        ctx.layout = (gp, pair, groups, rows, chunk)
        # back to row order with one gather (a scatter, index_copy_, measured several times slower on CPU)
        if pair is not None:
            return products.index_select(0, pair)
        return products if gp.identity else products.index_select(0, gp.inverse)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        gp, pair, groups, rows, chunk = ctx.layout
        b, k, m = weight.shape[1:]
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if pair is not None:  # the gradient of each pair: the sum over its edges
            grad = grad.new_zeros((rows.numel(),) + tuple(grad.shape[1:])).index_add_(0, pair, grad)
        elif not gp.identity:
            grad = grad.index_select(0, gp.perm)  # type order
        grad_w = torch.zeros_like(weight) if need_w else None
        grad_x = None
        if need_x:
            grad_x = x.new_empty(x.shape) if rows is None else torch.zeros_like(x)
        for s, e, pieces in _plan(groups, b * max(k, m), x.device, chunk):
            xs = None
            if need_w:
                xs = x[s:e] if rows is None else x.index_select(0, rows[s:e])
            gx = None
            if need_x:
                gx = grad_x[s:e] if rows is None else x.new_empty((e - s,) + tuple(x.shape[1:]))
            for t, lo, hi in pieces:
                gt = grad[lo:hi]
                if need_x:
                    _product(gt, weight[t].transpose(-1, -2), gx[lo - s : hi - s])
                if need_w:
                    xt = xs[lo - s : hi - s]
                    if b == 1:
                        grad_w[t, 0].addmm_(xt[:, 0].t(), gt[:, 0])
                    else:
                        grad_w[t].baddbmm_(xt.permute(1, 2, 0), gt.transpose(0, 1))
            if need_x and rows is not None:
                grad_x.index_add_(0, rows[s:e], gx)
        return grad_x, grad_w, None, None, None


def _product(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> None:
    """out[n, h] = x[n, h] @ weight[h] for x [n, B, K], weight [B, K, M], out [n, B, M] (a view it fills)."""
    if x.shape[1] == 1:
        torch.mm(x[:, 0], weight[0], out=out[:, 0])
    else:
        out.copy_(torch.bmm(x.transpose(0, 1), weight).transpose(0, 1))
