"""Fused vertex-balanced edge softmax + weighted aggregation (numba, CPU).

Forward: one loop over destinations (CSR by destination). Each destination
walks its in-edges twice: once for the max logit per head, once to
exponentiate inside the kernel (``fastexp.softmax_weight``: weights below
2**-64 of the largest are dropped, so attention sharpened by training does
not turn into denormal arithmetic) and sum the weights and the weighted
source rows; then it normalizes and writes its row. Nothing of edge
size is written: not the logits, not the weights, not the messages. The
per-destination max m and denominator s are kept for backward (only when a
gradient can be asked for).

Backward recomputes each edge's weight alpha = exp(l - m[v]) / s[v] where it
is needed instead of saving it. The logit gradient is
g_l[e] = alpha[e] * (d[e] - t[v]), d[e] = g[v] . x[src[e]],
t[v] = sum over v's in-edges of alpha * d:
- a loop over destinations (CSR by destination) sums t[v]. For logits per
  edge, whose gradient is itself per edge, its first walk over the in-edges
  stores d per edge in that gradient and its second reads d back (from
  cache) and overwrites it with g_l;
- a loop over sources (CSR by source) gives g_x[u] = sum over u's out-edges
  of alpha * g[dst], and for SDDMM logits recomputes d, then g_l and the
  pre-activation's gradient, which it sums into a's row (the loop's own) and
  into b's row (the destination's or the edge's pair row), each thread into
  its own copy of b's gradient. Both loops compute d from the same source
  lines without fast-math reordering (``SAME_DOT``), so they round it alike
  and d - t cancels exactly where one edge takes all the weight.
No atomics. Nothing of edge size is saved for backward with SDDMM logits,
nor allocated by their backward.

Logits come per edge (``edge_softmax_aggregate``: a [E, H]) or are computed
in every loop from node rows (``sddmm_softmax_aggregate``: act(a[src[e]] op
b[dst[e]]) from a [N_src, H] and b [num_dst, H], GAT's attention; or b
[rows, H] read as b[b_index[e]], RGAT's per (relation, destination) pair
scores). Rows read
at random are prefetched ``AHEAD`` edges early. ``part_kernel`` makes the
forward's destination loops for x given a part of its rows at a time
(``pair_softmax_aggregate``). Every
kernel is generated as source (``codegen``) for its constant widths, one
scalar per accumulator so they stay in vector registers; rows of more than
``MAX_BLOCK`` accumulators run as several launches over blocks of heads and
features. Same contracts as ``gnnc.backend.pytorch.edge_softmax_aggregate``
and ``sddmm_softmax_aggregate``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import torch
from torch.autograd.function import Function

from ..pytorch.common import as_heads, broadcast_shape, head_layout, heads_to_weight, sum_to, weight_as_heads
from ..pytorch.csr import csr_structure
from ..pytorch.first_order import first_order
from ..pytorch.softmax import check_sddmm_softmax_aggregate, check_softmax_aggregate, keep_for_backward, kept
from .codegen import generated_kernel, indent
from .interop import FASTMATH, as_array, empty, launch
from .sddmm import sddmm

# How many edges ahead the gathers of feature rows ask for them (logit rows are too narrow to gain).
AHEAD = 8
# Accumulators one kernel keeps in registers (heads x features of a block).
MAX_BLOCK = 128

SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
# Fast-math flags of the two backward kernels that each compute d = g[v] . x[u] for SDDMM logits: without
# reassociation or contraction both round it alike, so that d - t[v] is exactly 0 where one edge takes all the weight.
SAME_DOT: set = set()
# Running sums of one dot product over a head's features (``_dot``).
DOT_LANES = 8


def edge_softmax_aggregate(
    logits: torch.Tensor,
    x: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    *,
    chunk: int | None = None,
) -> torch.Tensor:
    """out[v] = sum over e with dst[e] == v of edge_softmax(logits)[e] * x[src[e]].

    Shapes and broadcasting as in the torch backend; ``chunk`` is accepted
    for signature compatibility and ignored (no edge chunks exist here).
    """
    logits, num_dst = check_softmax_aggregate(logits, x, src, dst, num_dst)
    _check_cpu(x)
    return _SoftmaxAggregate.apply(logits, None, x, src, dst, num_dst, None, None, None)


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

    Fused (the logits are computed inside the kernels, never stored) when
    ``a`` and ``b`` have one feature shape (GAT: [N, H] and [num_dst, H]
    against x [N, H, F]; RGAT: b per (relation, destination) pair, read
    through ``b_index``); otherwise the composition of this backend's
    primitives. ``chunk`` is passed to the composition only.
    """
    logits_feat, num_dst = check_sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, op, negative_slope, b_index)
    _check_cpu(x)
    if tuple(a.shape[1:]) != tuple(b.shape[1:]):
        logits = sddmm(a, src, b, dst if b_index is None else b_index, op, negative_slope=negative_slope, chunk=chunk)
        return edge_softmax_aggregate(logits, x, src, dst, num_dst)
    a, b = (t.reshape((t.shape[0],) + logits_feat) for t in (a, b))
    return _SoftmaxAggregate.apply(a, b, x, src, dst, num_dst, op, negative_slope, b_index)


def _check_cpu(x: torch.Tensor) -> None:
    if x.device.type != "cpu":
        raise ValueError(f"the cpu backend needs CPU tensors; x is on {x.device}")


class _Block(NamedTuple):
    """Heads h0 .. h0 + heads - 1 and features f0 .. f0 + feats - 1 of rows [H, F]."""

    h0: int
    heads: int
    f0: int
    feats: int


def blocks(num_heads: int, num_feats: int) -> list[_Block]:
    """The blocks one launch each covers: whole rows when they hold at most ``MAX_BLOCK`` accumulators."""
    if num_heads == 0 or num_feats == 0:
        return []
    hb = min(num_heads, MAX_BLOCK)
    fb = min(num_feats, max(1, MAX_BLOCK // hb))
    return [
        _Block(h0, min(hb, num_heads - h0), f0, min(fb, num_feats - f0))
        for h0 in range(0, num_heads, hb)
        for f0 in range(0, num_feats, fb)
    ]


class _SoftmaxAggregate(Function):
    """Softmax by destination of logits a[e] (``op`` None) or leaky_relu(a[src] op b[dst], slope) (slope
    1: the identity; b[b_index] where that is given), weighting x[src]; a / b feature shapes are the
    logits' (right-aligned against x's)."""

    @staticmethod
    def forward(ctx, a, b, x, src, dst, num_dst, op, slope, b_index):
        full = broadcast_shape(a.shape[1:], x.shape[1:])
        k = head_layout(a.shape[1:], full)
        # contiguous rows: the kernels read a head row with vector loads instead of gathers
        heads_a = weight_as_heads(a, full, k).contiguous()
        heads_b = None if b is None else weight_as_heads(b, full, k).contiguous()
        heads_x = as_heads(x, full, k).contiguous()
        num_heads, num_feats = heads_x.shape[1], heads_x.shape[2]
        keep = any(ctx.needs_input_grad[:3])
        by_dst = csr_structure(dst, num_dst, src)
        out = empty((num_dst, num_heads, num_feats), x)
        m = empty((num_dst if keep else 0, num_heads), x)
        s = empty((num_dst if keep else 0, num_heads), x)
        pair_b = b_index is not None
        arrays = (
            as_array(by_dst.col),
            as_array(by_dst.perm),
            heads_a.numpy(),
            array_or_empty(heads_b, heads_a),
            b_rows_array(b_index),
            scalar_like(heads_x, slope),
            heads_x.numpy(),
            out.numpy(),
            m.numpy(),
            s.numpy(),
            keep,
        )
        for block in blocks(num_heads, num_feats):
            launch(
                _forward_kernel(op, num_heads, num_feats, block, pair_b),
                as_array(by_dst.crow),
                src.numel() * block.heads * block.feats,
                *arrays,
            )
        if keep:
            keep_for_backward(
                ctx, heads_a, heads_b, heads_x, src, dst, m, s, b_index, (full, k, num_dst, op, slope), a, b, x
            )
        return out.view((num_dst,) + full)

    @staticmethod
    @first_order
    def backward(ctx, grad):
        (
            (heads_a, heads_b, heads_x, src, dst, m, s, b_index),
            (full, k, num_dst, op, slope),
            (a_shape, b_shape, x_shape),
            (need_a, need_b, need_x),
        ) = kept(ctx)
        pair_b = b_index is not None
        num_heads, num_feats = heads_x.shape[1], heads_x.shape[2]
        grad_rows = grad.reshape(num_dst, num_heads, num_feats).contiguous()
        inv_s = s.reciprocal()  # inf for destinations without in-edges, which no edge reads
        sddmm_logits = op is not None
        work = src.numel() * num_heads * num_feats
        # logits per edge: their gradient, a's, is per edge; SDDMM logits: a's and b's rows are sums
        # over edges, made in the source loop from t[v] = sum over v's in-edges of alpha * (g[v] . x[u])
        ga = (
            (empty(heads_a.shape, heads_a) if sddmm_logits else empty((src.numel(), num_heads), heads_x))
            if need_a
            else None
        )
        gb = torch.zeros_like(heads_b) if need_b else None
        gx = empty(heads_x.shape, heads_x) if need_x else None
        with_logits = need_a or need_b
        t = empty((num_dst, num_heads), heads_x) if with_logits and sddmm_logits else None
        shared = (
            heads_a.numpy(),
            array_or_empty(heads_b, heads_a),
            b_rows_array(b_index),
            scalar_like(heads_x, slope),
            heads_x.numpy(),
            grad_rows.numpy(),
            m.numpy(),
            inv_s.numpy(),
        )
        if with_logits:
            by_dst = csr_structure(dst, num_dst, src)
            for block in blocks(num_heads, num_feats):
                if block.f0 == 0:  # this loop takes whole rows of features
                    launch(
                        logit_grad_kernel(op, num_heads, num_feats, block, pair_b),
                        as_array(by_dst.crow),
                        work,
                        as_array(by_dst.col),
                        as_array(by_dst.perm),
                        *shared,
                        array_or_empty(t if sddmm_logits else ga, m),
                    )
        if need_x or (with_logits and sddmm_logits):
            by_src = csr_structure(src, heads_x.shape[0], dst)
            for block in blocks(num_heads, num_feats):
                with_ab = sddmm_logits and with_logits and block.f0 == 0  # a's and b's gradients once per head
                if need_x or with_ab:
                    launch(
                        source_grad_kernel(op, num_heads, num_feats, block, pair_b),
                        as_array(by_src.crow),
                        work,
                        as_array(by_src.col),
                        as_array(by_src.perm),
                        *shared,
                        array_or_empty(t, m),
                        array_or_empty(gx, heads_x),
                        array_or_empty(ga if sddmm_logits else None, heads_a),
                        need_x,
                        with_ab and need_a,
                        with_ab and need_b,
                        partial=array_or_empty(gb, heads_a),
                    )
        grad_a = None if ga is None else heads_to_weight(ga, a_shape, full, k)
        grad_b = None if gb is None else heads_to_weight(gb, b_shape, full, k)
        grad_x = None if gx is None else sum_to(gx.view((x_shape[0],) + full), x_shape[1:])
        return grad_a, grad_b, grad_x, None, None, None, None, None, None


def b_rows_array(b_index: torch.Tensor | None) -> np.ndarray:
    """Each edge's row of b (edge order), or an empty array where b is read by destination."""
    return np.empty(0, dtype=np.int64) if b_index is None else as_array(b_index)


def array_or_empty(t: torch.Tensor | None, like: torch.Tensor) -> np.ndarray:
    """``t`` as an array, or an empty one of ``like``'s dtype and rank where the kernel reads no such input."""
    if t is not None:
        return t.numpy()
    return np.empty((0,) * like.dim(), dtype=like.numpy().dtype)


def scalar_like(like: torch.Tensor, value: float | None):
    """``value`` (the leaky_relu slope; None, the identity: 1) in ``like``'s dtype."""
    return like.numpy().dtype.type(1.0 if value is None else value)


# ---- kernel sources --------------------------------------------------------------------------------
# A kernel covers one _Block, whose positions are constants in its source (a run-time offset would
# make numba wrap every index for negative values, and the loads of a row would no longer be one
# vector load). Per-head values are scalars named by the head's place in the block (m3, s3),
# accumulators by head and feature (c3_5). What depends on run-time flags is grouped under one
# ``if`` for all heads: the vectorizer works inside straight-line code, across heads.


def _logit(op: str | None, block: _Block, h: int, left: str, right: str) -> list[str]:
    """Lines setting l{h}, the logit of the block's head h (and y{h}, its pre-activation, for SDDMM logits)."""
    if op is None:
        return [f"l{h} = a[e, {block.h0 + h}]"]
    return [f"y{h} = {left} {SYMBOLS[op]} {right}", f"l{h} = y{h} if y{h} > zero else y{h} * slope"]


def _operand_grad(op: str, h: int, side: str, a: str, b: str, gy: str, into: str | None = None) -> str:
    """The line adding to ``into`` (default g{h}) the gradient of operand a (``side`` 'a') or b of
    y = a op b, from ``gy``, the gradient of y."""
    term = {
        ("add", "a"): gy,
        ("add", "b"): gy,
        ("sub", "a"): gy,
        ("sub", "b"): f"-{gy}",
        ("mul", "a"): f"{gy} * {b}",
        ("mul", "b"): f"{gy} * {a}",
        ("div", "a"): f"{gy} / {b}",
        ("div", "b"): f"-{gy} * {a} / ({b} * {b})",
    }[(op, side)]
    return f"{into or f'g{h}'} += {term}"


def _dot(block: _Block, h: int, num_feats: int, g_row: str, x_row: str) -> list[str]:
    """Lines setting d{h} = grad[g_row, head] . x[x_row, head] over all features (head: the block's h), in
    an order the source fixes: one running sum over up to ``DOT_LANES`` features (the heads' sums run
    side by side), else ``DOT_LANES`` running sums over features f mod ``DOT_LANES`` added up as a
    balanced tree. Independent sums vectorize without reassociation, and any kernel using these lines
    rounds d alike."""
    head, lanes = block.h0 + h, 1 if num_feats <= DOT_LANES else DOT_LANES
    names = [f"d{h}_{j}" for j in range(lanes)]
    whole = num_feats - num_feats % lanes
    lines = [f"{name} = zero" for name in names]
    if whole:
        lines += [f"for f in range(0, {whole}, {lanes}):"]
        lines += [f"    d{h}_{j} += grad[{g_row}, {head}, f + {j}] * x[{x_row}, {head}, f + {j}]" for j in range(lanes)]
    lines += [
        f"d{h}_{f - whole} += grad[{g_row}, {head}, {f}] * x[{x_row}, {head}, {f}]" for f in range(whole, num_feats)
    ]
    return lines + [f"d{h} = {_tree_sum(names)}"]


def _tree_sum(terms: list[str]) -> str:
    """``terms`` added as a balanced tree (one fixed order)."""
    if len(terms) == 1:
        return terms[0]
    half = (len(terms) + 1) // 2
    return f"({_tree_sum(terms[:half])} + {_tree_sum(terms[half:])})"


def _prefetch(table: str, index: str, num_heads: int, num_feats: int, block: _Block) -> list[str]:
    """Lines prefetching the block's part of row ``index``[i + AHEAD] of ``table`` [rows, H, F]."""
    return _prefetch_rows(
        [table],
        f"{index}[i + {AHEAD}]",
        index,
        num_heads * num_feats,
        block.h0 * num_feats + block.f0,
        (block.heads - 1) * num_feats + block.feats,
    )


def _prefetch_rows(
    tables: list[str], row: str, bound: str, width: int, offset: int, length: int, distance: int = AHEAD
) -> list[str]:
    """Lines prefetching ``length`` entries from ``offset`` of row ``row`` (an expression of the edge
    ``distance`` ahead of i, valid while i + distance < ``bound``.shape[0]) of each of ``tables`` (rows
    ``width`` wide)."""
    return [
        f"if i + {distance} < {bound}.shape[0]:",
        f"    ahead = {row}",
        *(f"    prefetch_span({t}, ahead * {width} + {offset}, {length})" for t in tables),
    ]


def _compiled(name: str, args: str, doc: str, per_row: list[str], fastmath: set = FASTMATH):
    """The kernel ``name(bounds, crow, {args})`` running ``per_row`` for each CSR row r (first, last: its entries)."""
    # the flags are in the source: numba's disk cache tells kernels apart by their source, not their flags
    lines = [
        f"# fast math: {', '.join(sorted(fastmath))}",
        f"def {name}(bounds, crow, {args}):",
        f'    """{doc}"""',
        "    zero, one = x.dtype.type(0), x.dtype.type(1)",
        "    for c in range(bounds.shape[0] - 1):",
        "        for r in range(bounds[c], bounds[c + 1]):",
        "            first, last = crow[r], crow[r + 1]",
        *indent(per_row, 3),
    ]
    return generated_kernel(name, "\n".join(lines) + "\n", fastmath)


def _scores_ahead(op: str | None, num_heads: int, block: _Block, pair_b: bool = False) -> list[str]:
    """Lines prefetching the logit rows the edge AHEAD reads: a[perm[i + AHEAD]] (logits per edge, in edge
    order: read at random by a destination's walk) or the source score row a[src[i + AHEAD]] (SDDMM logits),
    and with ``pair_b`` its row of b (``_pair_rows_ahead``)."""
    index = "perm" if op is None else "src"
    lines = _prefetch_rows(["a"], f"{index}[i + {AHEAD}]", index, num_heads, block.h0, block.heads)
    return lines + (_pair_rows_ahead(["b"], num_heads, block) if pair_b else [])


def _pair_rows_ahead(tables: list[str], num_heads: int, block: _Block) -> list[str]:
    """Lines prefetching, for the edge AHEAD, the block's part of its pair row b_rows[e] of each of ``tables``;
    b_rows[e] itself is read at random, so it is asked for twice as far ahead."""
    return _prefetch_rows(["b_rows"], f"perm[i + {2 * AHEAD}]", "perm", 1, 0, 1, 2 * AHEAD) + _prefetch_rows(
        tables, f"b_rows[perm[i + {AHEAD}]]", "perm", num_heads, block.h0, block.heads
    )


def _b_operand(pair_b: bool, h: int, head: int, row: str) -> str:
    """The logits' right operand for head h: b's row of the destination (``row``, hoisted as b{h}
    where it is the loop's row) or, with ``pair_b``, the edge's own row k = b_rows[e]."""
    return f"b[k, {head}]" if pair_b else f"b{h}" if row == "r" else f"b[{row}, {head}]"


def _edge_reads(op: str | None, pair_b: bool, first: str) -> list[str]:
    """Per-edge index reads: ``first`` (the other end), then the edge id and its row of b where used."""
    return [first] + (["e = perm[i]"] if op is None or pair_b else []) + (["k = b_rows[e]"] if pair_b else [])


def _hoisted_b(op: str | None, pair_b: bool, block: _Block) -> list[str]:
    """Destination rows of b loaded once per destination (not with ``pair_b``: each edge reads its own)."""
    return [] if op is None or pair_b else [f"b{h} = b[r, {block.h0 + h}]" for h in range(block.heads)]


def _max_walk(op: str | None, num_heads: int, block: _Block, pair_b: bool, reads: list[str]) -> list[str]:
    """Lines setting m{h}, the largest logit of the row's in-edges for each of the block's heads."""
    lines = ["lowest = -x.dtype.type(np.inf)"] + [f"m{h} = lowest" for h in range(block.heads)]
    walk = _scores_ahead(op, num_heads, block, pair_b) + reads
    for h in range(block.heads):
        walk += _logit(op, block, h, f"a[u, {block.h0 + h}]", _b_operand(pair_b, h, block.h0 + h, "r"))
        walk += [f"m{h} = max(m{h}, l{h})"]
    return lines + ["for i in range(first, last):", *indent(walk, 1)]


@functools.cache
def _forward_kernel(op: str | None, num_heads: int, num_feats: int, block: _Block, pair_b: bool = False):
    """Destination loop: the block's part of out[v], and (``keep``) m[v], s[v]."""
    heads, feats = range(block.heads), range(block.feats)
    reads = _edge_reads(op, pair_b, "u = src[i]")
    row = _hoisted_b(op, pair_b, block) + _max_walk(op, num_heads, block, pair_b, reads)
    row += [f"s{h} = zero" for h in heads] + [f"c{h}_{f} = zero" for h in heads for f in feats]
    edge = _prefetch("x", "src", num_heads, num_feats, block) + reads
    for h in heads:
        edge += _logit(op, block, h, f"a[u, {block.h0 + h}]", _b_operand(pair_b, h, block.h0 + h, "r"))
        edge += [f"w = softmax_weight(l{h} - m{h})", f"s{h} += w"]
        edge += [f"c{h}_{f} += w * x[u, {block.h0 + h}, {block.f0 + f}]" for f in feats]
    row += ["for i in range(first, last):", *indent(edge, 1)]
    row += [
        "if keep:",
        *indent([f"m[r, {block.h0 + h}] = m{h}" for h in heads] + [f"s[r, {block.h0 + h}] = s{h}" for h in heads], 1),
    ]
    for h in heads:
        row += [f"inv = one / s{h} if s{h} > zero else zero"]
        row += [f"out[r, {block.h0 + h}, {block.f0 + f}] = c{h}_{f} * inv" for f in feats]
    return _compiled(
        "softmax_aggregate_forward",
        "src, perm, a, b, b_rows, slope, x, out, m, s, keep",
        f"Block {tuple(block)} of out[v] = sum over v's in-edges of softmax(l) * x[src].",
        row,
    )


@functools.cache
def logit_grad_kernel(op: str | None, num_heads: int, num_feats: int, block: _Block, pair_b: bool = False):
    """Destination loop over the block's heads. Its walk over v's in-edges sums t[v] = sum of alpha * d,
    d = g[v] . x[u]. Logits per edge (``op`` None): the walk stores d per edge in ``out`` [E, H], and a
    second walk reads it back (so that d - t cancels exactly where it should) and overwrites it with the
    logit gradient alpha * (d - t). SDDMM logits: t is the result (``out`` [num_dst, H]); the source loop
    makes the gradients from it."""
    heads = range(block.heads)
    reads = ["u = src[i]", "e = perm[i]"] + (["k = b_rows[e]"] if pair_b else [])
    first_walk, second_walk = list(reads), list(reads)
    for h in heads:
        head = block.h0 + h
        alpha = _logit(op, block, h, f"a[u, {head}]", _b_operand(pair_b, h, head, "r"))
        alpha += [f"w{h} = softmax_weight(l{h} - m{h}) * q{h}"]
        first_walk += alpha + _dot(block, h, num_feats, "r", "u") + [f"t{h} += w{h} * d{h}"]
        if op is None:
            first_walk += [f"out[e, {head}] = d{h}"]
            second_walk += alpha + [f"out[e, {head}] = w{h} * (out[e, {head}] - t{h})"]
    row = ["if first == last:", "    continue"]  # (t of a row without in-edges: read by no edge)
    row += _hoisted_b(op, pair_b, block)
    row += [f"m{h} = m[r, {block.h0 + h}]" for h in heads] + [f"q{h} = inv_s[r, {block.h0 + h}]" for h in heads]
    row += [f"t{h} = zero" for h in heads]
    whole_rows = _Block(block.h0, block.heads, 0, num_feats)
    # logits per edge: their gradient rows, written in edge order, are asked for early too
    written = (
        []
        if op is not None
        else _prefetch_rows(["out"], f"perm[i + {AHEAD}]", "perm", num_heads, block.h0, block.heads)
    )
    row += [
        "for i in range(first, last):",
        *indent(
            _prefetch("x", "src", num_heads, num_feats, whole_rows)
            + _scores_ahead(op, num_heads, block, pair_b)
            + written
            + first_walk,
            1,
        ),
    ]
    if op is None:
        row += ["for i in range(first, last):", *indent(second_walk, 1)]
    else:
        row += [f"out[r, {block.h0 + h}] = t{h}" for h in heads]
    return _compiled(
        "softmax_aggregate_logit_grads",
        "src, perm, a, b, b_rows, slope, x, grad, m, inv_s, out",
        f"Logit gradients of heads {block.h0}..{block.h0 + block.heads - 1} by destination.",
        row,
        FASTMATH if op is None else SAME_DOT,
    )


@functools.cache
def source_grad_kernel(op: str | None, num_heads: int, num_feats: int, block: _Block, pair_b: bool = False):
    """Source loop, alpha recomputed: the block's part of x's gradient (``with_x``), and for SDDMM logits
    the pre-activation gradient alpha * (d - t[v]) of each edge (d recomputed as the destination loop
    computes it), summed into a's row (``with_a``) and into b's row in ``grad_b`` (``with_b``; this
    range's own copy: rows of b are shared by the edges of several sources)."""
    heads, feats = range(block.heads), range(block.feats)
    row = [f"a{h} = a[r, {block.h0 + h}]" for h in heads if op is not None]
    row += [f"c{h}_{f} = zero" for h in heads for f in feats] + [f"g{h} = zero" for h in heads]
    alpha, x_part, logit_part = [], [], []
    for h in heads:
        head = block.h0 + h
        right = _b_operand(pair_b, h, head, "v")
        alpha += _logit(op, block, h, f"a{h}", right)
        alpha += [f"w{h} = softmax_weight(l{h} - m[v, {head}]) * inv_s[v, {head}]"]
        x_part += [f"c{h}_{f} += w{h} * grad[v, {head}, {block.f0 + f}]" for f in feats]
        if op is not None:
            logit_part += _dot(block, h, num_feats, "v", "r")
            logit_part += [f"gl{h} = w{h} * (d{h} - t[v, {head}])", f"gy{h} = gl{h} if y{h} > zero else gl{h} * slope"]
    with_logits = []
    if op is not None:
        b_row = "k" if pair_b else "v"
        a_grads = [
            _operand_grad(op, h, "a", f"a{h}", _b_operand(pair_b, h, block.h0 + h, "v"), f"gy{h}") for h in heads
        ]
        b_grads = [
            _operand_grad(
                op,
                h,
                "b",
                f"a{h}",
                _b_operand(pair_b, h, block.h0 + h, "v"),
                f"gy{h}",
                f"grad_b[{b_row}, {block.h0 + h}]",
            )
            for h in heads
        ]
        with_logits = [
            "if with_a or with_b:",
            *indent(logit_part + ["if with_a:", *indent(a_grads, 1), "if with_b:", *indent(b_grads, 1)], 1),
        ]
    by_destination = (
        ["m", "inv_s"] + (["b", "grad_b"] if op is not None and not pair_b else []) + (["t"] if op is not None else [])
    )
    edge = _prefetch_rows(by_destination, f"dst[i + {AHEAD}]", "dst", num_heads, block.h0, block.heads)
    if op is None:  # logits per edge, read at random
        edge += _prefetch_rows(["a"], f"perm[i + {AHEAD}]", "perm", num_heads, block.h0, block.heads)
    if pair_b:
        edge += _pair_rows_ahead(["b", "grad_b"], num_heads, block)
    whole_rows = _Block(block.h0, block.heads, 0, num_feats)
    edge += _prefetch("grad", "dst", num_heads, num_feats, whole_rows if op is not None and block.f0 == 0 else block)
    edge += ["v = dst[i]", "e = perm[i]"] + (["k = b_rows[e]"] if pair_b else [])
    edge += alpha + ["if with_x:", *indent(x_part, 1)] + with_logits
    row += ["for i in range(first, last):", *indent(edge, 1)]
    row += [
        "if with_x:",
        *indent([f"grad_x[r, {block.h0 + h}, {block.f0 + f}] = c{h}_{f}" for h in heads for f in feats], 1),
    ]
    row += ["if with_a:", *indent([f"grad_a[r, {block.h0 + h}] = g{h}" for h in heads], 1)] if op is not None else []
    return _compiled(
        "softmax_aggregate_source_grads",
        "dst, perm, a, b, b_rows, slope, x, grad, m, inv_s, t, grad_x, grad_a, with_x, with_a, with_b, grad_b",
        f"Gradients by source of block {tuple(block)}.",
        row,
        FASTMATH if op is None else SAME_DOT,
    )


def _bisect(first: str, last: str, value: str, into: str | None = None) -> list[str]:
    """Lines setting ``into`` (default ``first``) to the first position in first..last - 1 whose ``perm`` entry
    is at least ``value`` (``last`` where none is); ``perm`` increases over that range."""
    return [
        f"lo_i, hi_i = {first}, {last}",
        "while lo_i < hi_i:",
        "    mid = (lo_i + hi_i) >> 1",
        f"    if perm[mid] < {value}:",
        "        lo_i = mid + 1",
        "    else:",
        "        hi_i = mid",
        f"{into or first} = lo_i",
    ]


@functools.cache
def part_kernel(
    kind: str, op: str, num_heads: int, num_feats: int, block: _Block, pair_b: bool = False, whole_run: bool = False
):
    """Destination loop of a forward where the rows of x exist a part at a time (sources lo..hi - 1, x holding
    those rows), over the block's heads:

    - ``stats``: m[v] and s[v] from the logits alone (x, out and the bounds unused);
    - ``sums``: with m and s given, the sum over v's in-edges from the part of softmax(l) * x[src], added
      into out[v].

    A part's in-edges are among the edges e_lo..e_hi - 1 (its relation's), which a row's edges (in
    increasing order: ``perm``) hold as one run, found by bisection; ``whole_run``: all of them read x."""
    heads, feats = range(block.heads), range(block.feats)
    reads = _edge_reads(op, pair_b, "u = src[i]")
    row = _hoisted_b(op, pair_b, block)
    if kind == "stats":
        row += _max_walk(op, num_heads, block, pair_b, reads) + [f"s{h} = zero" for h in heads]
        edge = _scores_ahead(op, num_heads, block, pair_b) + reads
    else:
        # rows without edges in the run, and rows all in it, need no bisection
        row += ["if first == last or perm[last - 1] < e_lo or perm[first] >= e_hi:", "    continue"]
        row += ["if perm[first] < e_lo:", *indent(_bisect("first", "last", "e_lo"), 1)]
        row += ["if perm[last - 1] >= e_hi:", *indent(_bisect("first", "last", "e_hi", "last"), 1)]
        row += ["if first == last:", "    continue"]  # (nothing to add)
        row += [f"m{h} = m[r, {block.h0 + h}]" for h in heads]
        row += [f"i{h} = one / s[r, {block.h0 + h}] if s[r, {block.h0 + h}] > zero else zero" for h in heads]
        row += [f"c{h}_{f} = zero" for h in heads for f in feats]
        edge = _prefetch_rows(
            ["x"],
            f"src[i + {AHEAD}] - lo",
            "src",
            num_heads * num_feats,
            block.h0 * num_feats + block.f0,
            (block.heads - 1) * num_feats + block.feats,
        )
        edge += _scores_ahead(op, num_heads, block, pair_b)  # no walk over this row has read them yet
        edge += reads[:1] + ([] if whole_run else ["if u < lo or u >= hi:", "    continue"]) + reads[1:]
        edge += ["p = u - lo"]
    for h in heads:
        edge += _logit(op, block, h, f"a[u, {block.h0 + h}]", _b_operand(pair_b, h, block.h0 + h, "r"))
        edge += [f"w = softmax_weight(l{h} - m{h})"]
        edge += (
            [f"s{h} += w"]
            if kind == "stats"
            else [f"c{h}_{f} += w * x[p, {block.h0 + h}, {block.f0 + f}]" for f in feats]
        )
    row += ["for i in range(first, last):", *indent(edge, 1)]
    if kind == "stats":
        row += [f"m[r, {block.h0 + h}] = m{h}" for h in heads] + [f"s[r, {block.h0 + h}] = s{h}" for h in heads]
    else:
        row += [f"out[r, {block.h0 + h}, {block.f0 + f}] += c{h}_{f} * i{h}" for h in heads for f in feats]
    return _compiled(
        f"softmax_aggregate_part_{kind}",
        "src, perm, a, b, b_rows, slope, x, out, m, s, lo, hi, e_lo, e_hi",
        f"Block {tuple(block)} of a destination loop over a part of x ({kind}).",
        row,
    )
