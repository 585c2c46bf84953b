"""Softmax aggregation of a typed pair table that backward rebuilds a part at a time (numba, CPU).

``rebuilt_pair_softmax_aggregate(a, b, x, weight, pair_node, pair_ptr, feat, src, dst, num_dst, op, ...)`` is
``sddmm_softmax_aggregate(a, b, z, src, dst, num_dst, op, ...)`` of the pair table
``z = gather_segment_matmul(x, pair_node, pair_ptr, weight).view(-1, *feat)`` (RGAT's typed message, one row
per (relation, source) pair: Hector's compact materialization), with the same values and gradients.

Nothing of z's size is kept for backward; z is made a part at a time (``x[node] @ W_r`` for one
relation's pairs lo..hi - 1, gathered and multiplied a cache-sized chunk at a time), and whole only once,
briefly, in backward:

- Forward: a destination loop sums each destination's softmax statistics (max m, denominator s) from the
  logits alone; then, per part (at most ``FORWARD_PART_BYTES``), a destination loop adds the weighted
  rows of the part's sources into out[v]. A row's edges of the part's relation are one run of its CSR
  row, found by bisection, so a walk per relation costs about one walk over all the edges.
- Backward: (1) z made whole from its parts, the destination loop of ``sddmm_softmax_aggregate``'s
  backward sums t[v] = sum over v's in-edges of alpha * (g[v] . z[u]) (``logit_grad_kernel``), and z is
  freed; (2) per part (at most ``PART_BYTES``), rebuilt by the same products, the source loop
  (``source_grad_kernel``) gives its rows of z's and a's gradients and adds into b's; z's gradient part
  becomes x's and the weight's at once (the backward of x[node] @ W_r) and is dropped. Both steps round
  d = g[v] . z[u] alike, so d - t cancels exactly where one edge takes all the weight.
- A gradient that is one value broadcast (the gradient of ``out.sum()``) is read as it is, not copied.

The trade: z is whole only during (1) and its gradient never, for two more products x[node] @ W_r
(forward's FLOPs each) and forward's second walk over the logits (measured in bench/results/docstring-figures.md).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch.autograd.function import Function

from ..pytorch.common import broadcast_shape, check_index, chunk_rows, head_layout, heads_to_weight, weight_as_heads
from ..pytorch.csr import csr_structure
from ..pytorch.first_order import first_order
from ..pytorch.softmax import check_sddmm_softmax_aggregate
from ..pytorch.typed_matmul import gather_segment_matmul
from .interop import as_array, empty, launch
from .softmax_aggregate import (
    array_or_empty,
    b_rows_array,
    blocks,
    logit_grad_kernel,
    part_kernel,
    scalar_like,
    sddmm_softmax_aggregate,
    source_grad_kernel,
)

# Largest part of the pair table (and of its gradient) that backward rebuilds at once.
PART_BYTES = 64 << 20
# Largest part forward computes at once: each part costs forward a walk over all the edges, so fewer, larger.
FORWARD_PART_BYTES = 384 << 20


def rebuilt_pair_softmax_aggregate(
    a: torch.Tensor,
    b: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    pair_node: torch.Tensor,
    pair_ptr,
    feat,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    op: str = "add",
    *,
    negative_slope: float | None = None,
    b_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """``sddmm_softmax_aggregate(a, b, z, src, dst, num_dst, op, ...)`` with z =
    ``gather_segment_matmul(x, pair_node, pair_ptr, weight).view(-1, *feat)``: ``src`` indexes z's rows (pairs
    of relation r are ``pair_ptr[r]`` up to ``pair_ptr[r + 1]``), z is not kept for backward. Where the fused
    kernels do not apply (a and b of other feature shapes, or logits broadcast over z's features in another
    layout) it runs as that composition."""
    feat = tuple(feat)
    check_index("pair_node", pair_node, x.shape[0], x.device)
    expected = (len(pair_ptr) - 1, x.shape[1], math.prod(feat)) if x.dim() == 2 else None
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"weight must be [R, K, M] = {list(expected or ('R', 'K', 'M'))} (R: pair_ptr segments, "
            f"K: x's columns, M: the pair rows' {feat} flattened), got {tuple(weight.shape)}; x "
            f"{tuple(x.shape)} must be [N, K]"
        )
    stand_in = x.new_empty(()).expand((pair_node.numel(),) + feat)  # z's shape, without its values
    logits_feat, num_dst = check_sddmm_softmax_aggregate(a, b, stand_in, src, dst, num_dst, op, negative_slope, b_index)
    if x.device.type != "cpu":
        raise ValueError(f"the cpu backend needs CPU tensors; x is on {x.device}")
    fused = (
        tuple(a.shape[1:]) == tuple(b.shape[1:])
        and len(logits_feat) <= len(feat)
        and all(d in (1, f) for d, f in zip(logits_feat[::-1], feat[::-1]))
    )
    if not fused:
        z = gather_segment_matmul(x, pair_node, pair_ptr, weight)
        return sddmm_softmax_aggregate(
            a, b, z.view((z.shape[0],) + feat), src, dst, num_dst, op, negative_slope=negative_slope, b_index=b_index
        )
    a, b = (t.reshape((t.shape[0],) + logits_feat) for t in (a, b))
    return _RebuiltPairSoftmaxAggregate.apply(
        a, b, x, weight, pair_node, tuple(pair_ptr), feat, src, dst, num_dst, op, negative_slope, b_index
    )


def parts(pair_ptr, row_bytes: int, part_bytes: int | None = None) -> list[tuple[int, int, int]]:
    """(relation, first pair, end) of each part of the pair table: at most ``part_bytes`` (default
    ``PART_BYTES``) of rows, within one relation."""
    step = max(1, (PART_BYTES if part_bytes is None else part_bytes) // max(1, row_bytes))
    return [
        (r, lo, min(lo + step, hi))
        for r, (start, hi) in enumerate(zip(pair_ptr, pair_ptr[1:]))
        for lo in range(start, hi, step)
    ]


class _RebuiltPairSoftmaxAggregate(Function):
    @staticmethod
    def forward(ctx, a, b, x, weight, pair_node, pair_ptr, feat, src, dst, num_dst, op, slope, b_index):
        full = broadcast_shape(a.shape[1:], feat)
        k = head_layout(a.shape[1:], full)
        heads_a, heads_b = (weight_as_heads(t, full, k).contiguous() for t in (a, b))
        num_heads = heads_a.shape[1]
        num_feats = math.prod(full) // max(1, num_heads)
        loops = _Loops(
            heads_a,
            heads_b,
            x,
            weight,
            pair_node,
            pair_ptr,
            src,
            dst,
            num_dst,
            num_heads,
            num_feats,
            b_index,
            slope,
            op,
        )
        out = torch.zeros((num_dst, num_heads, num_feats), dtype=x.dtype)
        m, s = (empty((num_dst, num_heads), x) for _ in range(2))
        loops.by_destination("stats", None, out, m, s)
        for part in loops.parts(FORWARD_PART_BYTES):
            loops.by_destination("sums", part, out, m, s)
        if any(ctx.needs_input_grad[:4]):
            ctx.save_for_backward(heads_a, heads_b, x, weight, pair_node, src, dst, m, s, b_index)
            ctx.layout = (full, k, num_dst, op, slope, pair_ptr, tuple(a.shape), tuple(b.shape))
        return out.view((num_dst,) + full)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        heads_a, heads_b, x, weight, pair_node, src, dst, m, s, b_index = ctx.saved_tensors
        full, k, num_dst, op, slope, pair_ptr, a_shape, b_shape = ctx.layout
        need_a, need_b, need_x, need_w = ctx.needs_input_grad[:4]
        num_heads = heads_a.shape[1]
        num_feats = math.prod(full) // max(1, num_heads)
        grad_rows = grad.reshape(num_dst, num_heads, num_feats)
        if any(grad_rows.stride()):  # else one value broadcast (the gradient of a sum): read as it is
            grad_rows = grad_rows.contiguous()
        with_logits, need_z = need_a or need_b, need_x or need_w
        loops = _Loops(
            heads_a,
            heads_b,
            x,
            weight,
            pair_node,
            pair_ptr,
            src,
            dst,
            num_dst,
            num_heads,
            num_feats,
            b_index,
            slope,
            op,
            grad_rows,
        )
        inv_s = s.reciprocal()
        t = loops.dot_sums(m, inv_s) if with_logits else None
        ga = empty(heads_a.shape, heads_a) if need_a else None
        gb = torch.zeros_like(heads_b) if need_b else None
        gx = torch.zeros_like(x) if need_x else None
        gw = torch.zeros_like(weight) if need_w else None
        for r, lo, hi in loops.parts(PART_BYTES) if need_z or with_logits else ():
            z = loops.rebuilt(r, lo, hi) if with_logits else None
            gz = empty((hi - lo, num_heads, num_feats), x) if need_z else None
            loops.by_source(lo, hi, z, m, inv_s, t, gz, None if ga is None else ga[lo:hi], gb, need_z, need_a, need_b)
            del z
            if need_z:
                gz = gz.view(hi - lo, num_heads * num_feats)
                if need_w:
                    loops.add_weight_grad(r, lo, hi, gz, gw)
                if need_x:
                    gx.index_add_(0, pair_node[lo:hi], gz @ weight[r].t())
        grad_a = None if ga is None else heads_to_weight(ga, a_shape, full, k)
        grad_b = None if gb is None else heads_to_weight(gb, b_shape, full, k)
        return grad_a, grad_b, gx, gw, None, None, None, None, None, None, None, None, None


def _edge_runs(by_src, pair_ptr) -> list[tuple[int, int, bool]]:
    """For each relation, a run of edge ids e_lo..e_hi - 1 holding all the edges reading its pairs, and whether
    it holds only those: its edges where they are consecutive ids (edges grouped by relation, as a graph keeps
    them), else all edges."""
    crow, perm = by_src.crow, by_src.perm
    runs = []
    for lo, hi in zip(pair_ptr, pair_ptr[1:]):
        ids = perm[int(crow[lo]) : int(crow[hi])]
        first, last = (int(ids.min()), int(ids.max()) + 1) if ids.numel() else (0, 0)
        runs.append((first, last, True) if last - first == ids.numel() else (0, perm.numel(), False))
    return runs


def _row_shares(dst: torch.Tensor, num_dst: int) -> np.ndarray:
    """Row pointers of the edges ``dst`` by destination: what a walk over only those edges does per row."""
    return np.concatenate(([0], np.cumsum(torch.bincount(dst, minlength=num_dst).numpy())))


class _Loops:
    """The kernels' launches over the pair table's parts, by destination and by source, with the arguments they
    share (``grad``: g by destination, for backward)."""

    def __init__(
        self,
        heads_a,
        heads_b,
        x,
        weight,
        pair_node,
        pair_ptr,
        src,
        dst,
        num_dst,
        num_heads,
        num_feats,
        b_index,
        slope,
        op,
        grad=None,
    ):
        self.heads_a, self.x, self.weight, self.pair_node, self.pair_ptr = heads_a, x, weight, pair_node, pair_ptr
        self.num_heads, self.num_feats, self.op, self.pair_b = num_heads, num_feats, op, b_index is not None
        self.scores = (heads_a.numpy(), array_or_empty(heads_b, heads_a), b_rows_array(b_index), scalar_like(x, slope))
        self.grad = array_or_empty(grad, heads_a.unsqueeze(-1))
        self.dst, self.num_dst = dst, num_dst
        self.by_dst = csr_structure(dst, num_dst, src)
        self.by_src = csr_structure(src, pair_node.numel(), dst)

    @functools.cached_property
    def runs(self) -> list[tuple[int, int, bool]]:
        """Each relation's run of edge ids (``_edge_runs``): forward's walks by part read them."""
        return _edge_runs(self.by_src, self.pair_ptr)

    @functools.cached_property
    def shares(self) -> list:
        """Each relation's row pointers of its own edges (``_row_shares``), where its run holds only those."""
        return [_row_shares(self.dst[lo:hi], self.num_dst) if exact else None for lo, hi, exact in self.runs]

    def parts(self, part_bytes: int) -> list[tuple[int, int, int]]:
        return parts(self.pair_ptr, self.num_heads * self.num_feats * self.x.element_size(), part_bytes)

    def rebuilt(self, r: int, lo: int, hi: int, into: torch.Tensor | None = None) -> torch.Tensor:
        """Rows lo..hi - 1 of the pair table (relation r) as [rows, H, F] (written into ``into`` when given), by
        the same products on every call: x's rows gathered and multiplied a cache-sized chunk at a time."""
        out = (
            empty((hi - lo, self.num_heads * self.num_feats), self.x)
            if into is None
            else into.view(hi - lo, self.num_heads * self.num_feats)
        )
        for s, e in self._chunks(lo, hi):
            torch.mm(self.x.index_select(0, self.pair_node[lo + s : lo + e]), self.weight[r], out=out[s:e])
        return out.view(hi - lo, self.num_heads, self.num_feats)

    def add_weight_grad(self, r: int, lo: int, hi: int, gz: torch.Tensor, gw: torch.Tensor) -> None:
        """gw[r] += x[node[lo:hi]]^T gz, by the chunks of ``rebuilt``."""
        for s, e in self._chunks(lo, hi):
            gw[r].addmm_(self.x.index_select(0, self.pair_node[lo + s : lo + e]).t(), gz[s:e])

    def _chunks(self, lo: int, hi: int):
        return chunk_rows(hi - lo, self.x.shape[1], self.x.device, None)

    def dot_sums(self, m, inv_s) -> torch.Tensor:
        """t[v] = sum over v's in-edges of alpha * (g[v] . z[u]) (``logit_grad_kernel``), on the whole table
        made by the products that rebuild the parts ``by_source`` reads (so its d - t cancels exactly where
        one edge takes all the weight). The table is freed on return."""
        z = empty((self.pair_node.numel(), self.num_heads, self.num_feats), self.x)
        for r, lo, hi in self.parts(PART_BYTES):
            self.rebuilt(r, lo, hi, into=z[lo:hi])
        t = empty(tuple(m.shape), m)
        for block in blocks(self.num_heads, self.num_feats):
            if block.f0 == 0:  # whole rows of features
                launch(
                    logit_grad_kernel(self.op, self.num_heads, self.num_feats, block, self.pair_b),
                    as_array(self.by_dst.crow),
                    self.by_dst.col.numel() * self.num_heads * self.num_feats,
                    as_array(self.by_dst.col),
                    as_array(self.by_dst.perm),
                    *self.scores,
                    z.numpy(),
                    self.grad,
                    m.numpy(),
                    inv_s.numpy(),
                    t.numpy(),
                )
        return t

    def by_destination(self, kind: str, part, out, m, s) -> None:
        """``part_kernel(kind)`` over all destinations, for ``part`` (relation, lo, hi) of the table (None: stats)."""
        r, lo, hi = part if part is not None else (0, 0, 0)
        z = self.rebuilt(r, lo, hi) if part is not None else None
        e_lo, e_hi, exact = self.runs[r] if part is not None else (0, 0, False)
        whole_run = exact and (lo, hi) == (self.pair_ptr[r], self.pair_ptr[r + 1])
        edges = (e_hi - e_lo) if part is not None else self.by_dst.col.numel()
        crow = as_array(self.by_dst.crow)
        for block in blocks(self.num_heads, self.num_feats):
            if kind == "stats" and block.f0 != 0:  # per head
                continue
            launch(
                part_kernel(kind, self.op, self.num_heads, self.num_feats, block, self.pair_b, whole_run),
                crow,
                edges * block.heads * block.feats,
                as_array(self.by_dst.col),
                as_array(self.by_dst.perm),
                *self.scores,
                array_or_empty(z, self.heads_a.unsqueeze(-1)),
                out.numpy(),
                m.numpy(),
                s.numpy(),
                lo,
                hi,
                e_lo,
                e_hi,
                balance=None if part is None else self.shares[r],
            )

    def by_source(self, lo, hi, z, m, inv_s, t, gz, ga, gb, with_z, need_a, need_b) -> None:
        """``source_grad_kernel`` over the sources lo..hi - 1 (z: their rebuilt rows, or None where it reads
        none), its entries counted from the first of them; gz, ga: their rows of z's and a's gradients."""
        crow, col, perm = (as_array(a) for a in (self.by_src.crow, self.by_src.col, self.by_src.perm))
        first, last = int(crow[lo]), int(crow[hi])
        for block in blocks(self.num_heads, self.num_feats):
            with_ab = t is not None and block.f0 == 0  # a's and b's gradients once per head
            if with_z or with_ab:
                launch(
                    source_grad_kernel(self.op, self.num_heads, self.num_feats, block, self.pair_b),
                    crow[lo : hi + 1] - first,
                    (last - first) * self.num_heads * self.num_feats,
                    col[first:last],
                    perm[first:last],
                    self.heads_a[lo:hi].numpy(),
                    *self.scores[1:],
                    array_or_empty(z, self.heads_a.unsqueeze(-1)),
                    self.grad,
                    m.numpy(),
                    inv_s.numpy(),
                    array_or_empty(t, m),
                    array_or_empty(gz, self.heads_a.unsqueeze(-1)),
                    array_or_empty(ga, self.heads_a),
                    with_z,
                    with_ab and need_a,
                    with_ab and need_b,
                    partial=array_or_empty(gb, self.heads_a),
                )
