"""Per-head SpMM and SDDMM kernels over (row, column) edge lists, with a cached CSR.

These are the two workhorses behind ``spmm``, ``sddmm`` (dot),
``segment_reduce`` (sum/mean) and ``edge_softmax_aggregate``. Features come
in "head form" ``[rows, H, F]`` and edge weights as ``[E, H]``: weight
``w[e, h]`` scales all ``F`` features of head ``h``.

On CPU and CUDA (float32/float64, at most ``MAX_SPARSE_HEADS`` heads, at
least ``SPARSE_MIN_ELEMENTS`` message elements) they run as one CSR sparse
matmul / sampled dense-dense matmul over the block-diagonal matrix
diag(A_0, ..., A_{H-1}) (A_h: the graph weighted by head h) against the
head-major features [H * rows, F], which is faster than
gather + index_add on CPU (above ``MAX_BLOCK_ENTRIES`` head-edges, one
matmul per head over A instead: the block columns are not worth caching);
otherwise they fall back to edge chunks of gather + index_add. One call
rather than one per head matters on busy cores, where every parallel
region can cost milliseconds; small problems
stay on the fallback for the same reason. The CSR structure (edges sorted
by row) is cached on the data pointer, shape, strides and version counter
of the index tensors (the last ``CACHE_SIZE`` structures, pinning their
index tensors), so a plan that passes the same graph tensors every step
sorts once; in-place changes are seen through the version counter, changes
that bypass it (``.data``, a shared numpy array) are not.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch

from ...bounded_cache import BoundedCache
from ...stage_timings import timed
from .common import chunk_rows, clear_index_ranges, tensor_identity

SPARSE_DEVICE_TYPES = frozenset({"cpu", "cuda"})
MAX_SPARSE_HEADS = 16
SPARSE_MIN_ELEMENTS = 1 << 18
CACHE_SIZE = 8
# Above this many block-diagonal column entries (heads * E), heads run as one sparse matmul each over the
# plain structure: the block columns would be cached at 8 bytes per entry (2.7 GB for HGT on full ogbn-mag),
# while a call per head costs nothing that matters at that size.
MAX_BLOCK_ENTRIES = 1 << 23
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class CsrStructure:
    """Edges sorted stably by row: ``perm[i]`` is the edge at sorted position ``i``."""

    crow: torch.Tensor  # [num_rows + 1] row offsets
    col: torch.Tensor  # [E] column of each sorted edge (the edge id when built without columns)
    perm: torch.Tensor  # [E]; the three int32 on the CPU (where the ids fit), else int64
    block_cols: dict = field(default_factory=dict)  # (heads, num_cols) -> [heads * E] block-diagonal columns

    def block(self, heads: int, num_cols: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(crow, col) of diag(A, ..., A) with ``heads`` blocks; block h holds entries h*E .. (h+1)*E."""
        if heads == 1:
            return self.crow, self.col
        num_edges = self.col.numel()
        offsets = torch.arange(heads, device=self.col.device)
        crow = torch.cat(
            [
                (offsets[:, None] * num_edges + self.crow[None, :-1]).reshape(-1),
                self.crow.new_full((1,), heads * num_edges),
            ]
        )
        key = (heads, num_cols)
        if key not in self.block_cols:
            self.block_cols[key] = (offsets[:, None] * num_cols + self.col[None, :]).reshape(-1)
        return crow, self.block_cols[key]


# key -> (rows, cols, structure). Holding rows/cols keeps their storage alive, so
# no other tensor can reuse the data pointer in the key while the entry exists.
_cache: BoundedCache[tuple] = BoundedCache(CACHE_SIZE)


def clear_structure_cache() -> None:
    """Drop every cached CSR structure and index range (and the index tensors they pin)."""
    _cache.clear()
    clear_index_ranges()


def csr_structure(rows: torch.Tensor, num_rows: int, cols: torch.Tensor | None = None) -> CsrStructure:
    """CSR of edges ``(rows[e], cols[e])`` (columns = edge ids when ``cols`` is None)."""
    key = (num_rows, tensor_identity(rows), None if cols is None else tensor_identity(cols))
    cacheable = key[1] is not None and (cols is None or key[2] is not None)
    hit = _cache.get(key) if cacheable else None
    if hit is not None:
        return hit[2]
    with timed("graph preparation"):
        structure = _build(rows, num_rows, cols)
    if cacheable:
        _cache.put(key, (rows, cols, structure))
    return structure


def _build(rows, num_rows, cols) -> CsrStructure:
    e = rows.numel()
    # On the CPU the arrays are int32 where the ids fit: half the bytes of what stays cached, MKL's sparse
    # matmul reads them without converting, and the numba kernels see one index type.
    narrow = rows.device.type == "cpu" and max(e, num_rows + 1, _max_id(cols) + 1) <= INT32_MAX
    index_dtype = torch.int32 if narrow else torch.int64
    if e < 2 or bool((rows[1:] >= rows[:-1]).all()):
        perm = torch.arange(e, dtype=index_dtype, device=rows.device)
        col = cols
    else:
        perm = torch.sort(rows, stable=True).indices
        col = None if cols is None else cols.index_select(0, perm)
        perm = perm.to(index_dtype)
    col = perm if col is None else col.to(index_dtype)
    crow = torch.zeros(num_rows + 1, dtype=index_dtype, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=num_rows), 0, out=crow[1:])
    return CsrStructure(crow, col, perm)


def _max_id(cols: torch.Tensor | None) -> int:
    return int(cols.max()) if cols is not None and cols.numel() else 0


def _use_sparse(t: torch.Tensor, num_edges: int, heads: int, feats: int) -> bool:
    return (
        t.device.type in SPARSE_DEVICE_TYPES
        and t.dtype in (torch.float32, torch.float64)
        and 1 <= heads <= MAX_SPARSE_HEADS
        and num_edges * heads * feats >= SPARSE_MIN_ELEMENTS
    )


def _blocks(heads: int, num_edges: int) -> bool:
    """Whether ``heads`` heads run as one block-diagonal sparse matmul (else one per head)."""
    return heads * num_edges <= MAX_BLOCK_ENTRIES


def _block_csr(structure: CsrStructure, heads: int, values: torch.Tensor, num_cols: int) -> torch.Tensor:
    """diag(A_0, ..., A_{heads-1}) with ``values`` [heads * E] head-major (sorted edge order within a head)."""
    crow, col = structure.block(heads, num_cols)
    shape = (heads * (structure.crow.numel() - 1), heads * num_cols)
    with warnings.catch_warnings():  # "sparse CSR support is in beta" (once per process)
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def _head_major(x: torch.Tensor) -> torch.Tensor:
    """[rows, H, F] -> [H * rows, F], head h's rows contiguous."""
    return x.transpose(0, 1).reshape(x.shape[0] * x.shape[1], x.shape[2])


def head_spmm(
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
    """out[r, h, :] = row_scale[r] * sum over e with rows[e] == r of weight[e, h] * col_scale[c] * x[c, h, :],
    c = cols[e].

    ``x`` [C, H, F]; ``cols`` None means ``cols[e] = e``; ``weight`` [E, H] or None (all ones); the scales
    are vectors ([num_rows], [C]) or None (all ones).
    """
    if col_scale is not None:
        x = x * col_scale.view(-1, 1, 1)
    out = _head_spmm(x, rows, cols, num_rows, weight, chunk)
    return out if row_scale is None else out.mul_(row_scale.view(-1, 1, 1))


def _head_spmm(x, rows, cols, num_rows, weight, chunk):
    heads, feats = x.shape[1], x.shape[2]
    if _use_sparse(x, rows.numel(), heads, feats):
        structure = csr_structure(rows, num_rows, cols)
        if weight is None:
            values = x.new_ones(heads * rows.numel())
        else:
            values = weight.index_select(0, structure.perm).t().reshape(-1)
        if not _blocks(heads, rows.numel()):
            out = x.new_empty(num_rows, heads, feats)
            for h, v in enumerate(values.view(heads, -1)):
                out[:, h] = torch.sparse.mm(_block_csr(structure, 1, v, x.shape[0]), x[:, h])
            return out
        out = torch.sparse.mm(_block_csr(structure, heads, values, x.shape[0]), _head_major(x))
        return out.view(heads, num_rows, feats).transpose(0, 1).contiguous()
    out = x.new_zeros(num_rows, heads, feats)
    for s, e in chunk_rows(rows.numel(), heads * feats, x.device, chunk):
        msg = x[s:e] if cols is None else x.index_select(0, cols[s:e])
        if weight is not None:
            msg = msg * weight[s:e, :, None]
        out.index_add_(0, rows[s:e], msg)
    return out


def head_sddmm(
    a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, chunk: int | None = None
) -> torch.Tensor:
    """out[e, h] = a[rows[e], h, :] . b[cols[e], h, :] for ``a`` [Ra, H, F], ``b`` [Rb, H, F]."""
    heads = a.shape[1]
    num_edges = rows.numel()
    out = a.new_empty(num_edges, heads)
    blocks = _blocks(heads, num_edges)
    # sampled_addmm rejects more stored entries than the dense shape has (many multi-edges).
    dense_entries = (heads if blocks else 1) * a.shape[0] * b.shape[0]
    if _use_sparse(a, num_edges, heads, a.shape[2]) and num_edges <= dense_entries:
        structure = csr_structure(rows, a.shape[0], cols)
        if not blocks:
            pattern = _block_csr(structure, 1, a.new_zeros(num_edges), b.shape[0])
            for h in range(heads):
                values = torch.sparse.sampled_addmm(pattern, a[:, h], b[:, h].t(), beta=0.0).values()
                out[:, h][structure.perm] = values
            return out
        pattern = _block_csr(structure, heads, a.new_zeros(heads * num_edges), b.shape[0])
        values = torch.sparse.sampled_addmm(pattern, _head_major(a), _head_major(b).t(), beta=0.0).values()
        out[structure.perm] = values.view(heads, num_edges).t()
        return out
    for s, e in chunk_rows(num_edges, heads * a.shape[2], a.device, chunk):
        torch.linalg.vecdot(a.index_select(0, rows[s:e]), b.index_select(0, cols[s:e]), out=out[s:e])
    return out
