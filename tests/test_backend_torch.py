"""gnnc.backend.pytorch primitives against naive gather / index_add / mailbox formulations.

Every primitive is checked forward and backward: gradcheck in float64 on tiny
inputs, and direct comparison with a naive autograd formulation on index sets
with zero in-degree nodes, self loops, multi-edges, unsorted destinations,
zero edges and a single node; with the CSR kernels and with the chunked
fallback, and with chunks smaller than E.
"""

from __future__ import annotations

import contextlib
import math
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnc.backend.pytorch import (
    clear_structure_cache,
    csr,
    edge_softmax,
    edge_softmax_aggregate,
    gather_segment_matmul,
    head_dot,
    scaled_spmm,
    sddmm,
    sddmm_softmax_aggregate,
    segment_matmul,
    segment_reduce,
    spmm,
)

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-8, atol=1e-10)}
CASES = ["multi", "no_edges", "one_node"]
PATHS = ["sparse", "sparse-per-head", "chunked"]


@contextlib.contextmanager
def kernels(path: str):
    """Run the per-head sums as CSR matmuls ("sparse", even on tiny inputs: one block-diagonal matmul over
    all heads; "sparse-per-head": one matmul per head, as on large graphs) or as gather + index_add ("chunked").

    The sparse kernels run single-threaded here: on tiny inputs a parallel
    region on busy cores costs more than the whole test.
    """
    if path == "chunked":
        with mock.patch.object(csr, "SPARSE_DEVICE_TYPES", frozenset()):
            yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    blocks = 0 if path == "sparse-per-head" else csr.MAX_BLOCK_ENTRIES
    try:
        with mock.patch.object(csr, "SPARSE_MIN_ELEMENTS", 0), mock.patch.object(csr, "MAX_BLOCK_ENTRIES", blocks):
            yield
    finally:
        torch.set_num_threads(threads)


def edges(case: str, seed: int = 0, num_src: int = 9, num_dst: int = 12, num_edges: int = 40):
    """(num_src, num_dst, src, dst) for one of CASES.

    "multi": unsorted dst, the last quarter of destinations without in-edges,
    self loops and repeated edges; "no_edges": E = 0; "one_node": one node
    with four self loops.
    """
    if case == "no_edges":
        return num_src, num_dst, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    if case == "one_node":
        return 1, 1, torch.zeros(4, dtype=torch.long), torch.zeros(4, dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    receivers = max(1, (3 * num_dst) // 4)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, receivers, (num_edges,), generator=gen)
    loops = torch.arange(min(3, num_src, receivers))
    src = torch.cat([src, loops, src[:3]])
    dst = torch.cat([dst, loops, dst[:3]])
    return num_src, num_dst, src, dst


def rand(*shape, dtype=torch.float64, ties=False, positive=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randint(-2, 3, shape, generator=gen).to(dtype) if ties else torch.randn(shape, generator=gen, dtype=dtype)
    if positive:  # divisors: away from zero, either sign
        t = torch.where(t >= 0, t.abs() + 0.5, -t.abs() - 0.5)
    return t.requires_grad_()


def lift(t, ndim):
    return t.reshape((t.shape[0],) + (1,) * (ndim - (t.dim() - 1)) + tuple(t.shape[1:]))


def grads(out, inputs, seed=1):
    g = rand(*out.shape, dtype=out.dtype, seed=seed).detach()
    leaves = [t for t in inputs if t is not None]
    return list(torch.autograd.grad(out, leaves, g, allow_unused=True))


def assert_close(actual, expected, dtype):
    for a, e in zip(actual, expected):
        if e is None:
            assert a is None or not a.abs().any()
        else:
            torch.testing.assert_close(a, e, **TOL[dtype])


def check_against(fn, naive, inputs, dtype):
    out, ref = fn(*inputs), naive(*inputs)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    with torch.no_grad():  # inference skips the arg-extremum pass of max/min
        torch.testing.assert_close(fn(*inputs), out)
    assert_close(grads(out, inputs), grads(ref, inputs), dtype)


# ---------- naive references (plain autograd) ----------


def naive_reduce(msg, dst, n, op):
    """Sum/mean by index_add; max/min over a padded mailbox (ties: first = smallest edge id)."""
    feat = tuple(msg.shape[1:])
    deg = torch.bincount(dst, minlength=n)
    view = (n,) + (1,) * len(feat)
    if op in ("sum", "mean"):
        out = msg.new_zeros((n,) + feat).index_add(0, dst, msg)
        return out / deg.clamp(min=1).view(view).to(msg.dtype) if op == "mean" else out
    order = torch.sort(dst, stable=True).indices
    d = dst[order]
    pos = torch.arange(dst.numel()) - (torch.cumsum(deg, 0) - deg)[d]
    width = max(int(deg.max()) if dst.numel() else 0, 1)
    box = msg.new_full((n, width) + feat, -math.inf if op == "max" else math.inf).index_put((d, pos), msg[order])
    out = box.max(1).values if op == "max" else box.min(1).values
    return torch.where((deg > 0).view(view), out, torch.zeros((), dtype=msg.dtype))


def naive_binary(op, a, b):
    ndim = max(a.dim(), b.dim()) - 1
    a, b = lift(a, ndim), lift(b, ndim)
    if op == "dot":
        return (a * b).sum(-1, keepdim=True)
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)


def naive_spmm(x, src, dst, n, w, op, reduce):
    msg = x[src] if w is None else naive_binary(op, x[src], w)
    return naive_reduce(msg, dst, n, reduce)


def naive_softmax(logits, dst, n):
    index = dst.view((-1,) + (1,) * (logits.dim() - 1)).expand_as(logits)
    m = logits.new_full((n,) + tuple(logits.shape[1:]), -math.inf).scatter_reduce(0, index, logits.detach(), "amax")
    ex = torch.exp(logits - m[dst])
    return ex / ex.new_zeros(m.shape).index_add(0, dst, ex)[dst]


def naive_softmax_aggregate(logits, x, src, dst, n):
    if logits.dim() == x.dim() - 1:
        logits = logits.unsqueeze(-1)
    alpha = naive_softmax(logits, dst, n)
    msg = naive_binary("mul", alpha, x[src])
    return msg.new_zeros((n,) + tuple(msg.shape[1:])).index_add(0, dst, msg)


def naive_sddmm_softmax_aggregate(a, b, x, src, dst, n, op, slope, b_index=None):
    logits = naive_binary(op, a[src], b[dst if b_index is None else b_index])
    if slope is not None:
        logits = torch.nn.functional.leaky_relu(logits, slope)
    return naive_softmax_aggregate(logits, x, src, dst, n)


def naive_segment_matmul(x, ptr, weight, bias):
    types = torch.repeat_interleave(torch.arange(len(ptr) - 1), torch.tensor(ptr).diff())
    out = torch.bmm(x[:, None], weight[types])[:, 0]
    return out if bias is None else out + bias[types]


def naive_gather_segment_matmul(x, index, ptr, weight):
    rel = torch.repeat_interleave(torch.arange(len(ptr) - 1), torch.tensor(ptr).diff())
    return torch.bmm(x[index][:, None], weight[rel])[:, 0]


# ---------- segment_reduce ----------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_segment_reduce_matches_naive(op, dtype, case, path):
    _, n, _, dst = edges(case)
    values = rand(dst.numel(), 3, 2, dtype=dtype, ties=op in ("max", "min"))
    with kernels(path):
        for chunk in (None, 5):
            check_against(
                lambda v: segment_reduce(v, dst, n, op, chunk=chunk),
                lambda v: naive_reduce(v, dst, n, op),
                [values],
                dtype,
            )


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_segment_reduce_gradcheck(op):
    _, n, _, dst = edges("multi", num_edges=10, num_dst=6)
    values = rand(dst.numel(), 2)
    assert torch.autograd.gradcheck(lambda v: segment_reduce(v, dst, n, op, chunk=4), (values,))
    assert torch.autograd.gradcheck(lambda v: segment_reduce(v, dst, n, op), (values[:, 0].detach().requires_grad_(),))


def test_segment_max_ties_go_to_smallest_edge():
    values = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0], requires_grad=True)
    dst = torch.tensor([0, 0, 1, 0, 0])
    out = segment_reduce(values, dst, 3, "max", chunk=2)
    assert out.tolist() == [3.0, 3.0, 0.0]
    out.backward(torch.tensor([10.0, 20.0, 30.0]))
    assert values.grad.tolist() == [0.0, 10.0, 20.0, 0.0, 0.0]


# ---------- edge_softmax ----------


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 1e4])
@pytest.mark.parametrize("feat", [(), (3,), (2, 1)])
def test_edge_softmax_matches_naive(feat, scale, dtype, case):
    _, n, _, dst = edges(case)
    logits = (scale * rand(dst.numel(), *feat, dtype=dtype)).detach().requires_grad_()
    check_against(
        lambda logit: edge_softmax(logit, dst, n), lambda logit: naive_softmax(logit, dst, n), [logits], dtype
    )


def test_edge_softmax_gradcheck_and_normalisation():
    _, n, _, dst = edges("multi", num_edges=10, num_dst=6)
    logits = rand(dst.numel(), 2)
    assert torch.autograd.gradcheck(lambda logit: edge_softmax(logit, dst, n), (logits,))
    alpha = edge_softmax(1e4 * logits.detach(), dst, n)
    sums = torch.zeros(n, 2, dtype=alpha.dtype).index_add_(0, dst, alpha)
    has_edges = torch.bincount(dst, minlength=n) > 0
    torch.testing.assert_close(sums[has_edges], torch.ones_like(sums[has_edges]))


# ---------- spmm ----------

SPMM_SHAPES = {  # x features, edge-weight features
    "heads": ((3, 4), (3, 1)),
    "bcast_x": ((1, 4), (3, 1)),
    "scalar": ((4,), ()),
    "elementwise": ((3, 4), (4,)),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shapes", list(SPMM_SHAPES))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("op", ["copy", "mul", "add", "sub", "div"])
def test_spmm_matches_naive(op, reduce, shapes, path):
    ns, nd, src, dst = edges("multi")
    xf, wf = SPMM_SHAPES[shapes]
    ties = reduce in ("max", "min")
    x = rand(ns, *xf, ties=ties)
    w = None if op == "copy" else rand(src.numel(), *wf, ties=ties, positive=op == "div", seed=2)
    with kernels(path):
        for chunk in (None, 7):
            check_against(
                lambda x, w: spmm(x, src, dst, nd, w, op, reduce, chunk=chunk),
                lambda x, w: naive_spmm(x, src, dst, nd, w, op, reduce),
                [x, w],
                torch.float64,
            )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduce", ["sum", "max"])
@pytest.mark.parametrize("op", ["copy", "mul", "sub"])
def test_spmm_float32_and_degenerate_graphs(op, reduce, case, path):
    ns, nd, src, dst = edges(case)
    x = rand(ns, 3, 4, dtype=torch.float32)
    w = None if op == "copy" else rand(src.numel(), 3, 1, dtype=torch.float32, seed=2)
    with kernels(path):
        check_against(
            lambda x, w: spmm(x, src, dst, nd, w, op, reduce, chunk=5),
            lambda x, w: naive_spmm(x, src, dst, nd, w, op, reduce),
            [x, w],
            torch.float32,
        )


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("op", ["copy", "mul", "add", "sub", "div"])
def test_spmm_gradcheck(op, reduce):
    ns, nd, src, dst = edges("multi", num_src=5, num_dst=6, num_edges=8)
    x = rand(ns, 2, 3)
    w = None if op == "copy" else rand(src.numel(), 2, 1, positive=op == "div", seed=2)
    inputs = (x,) if w is None else (x, w)
    assert torch.autograd.gradcheck(
        lambda *t: spmm(t[0], src, dst, nd, t[1] if len(t) > 1 else None, op, reduce, chunk=3), inputs
    )


@st.composite
def broadcast_case(draw):
    """Random (full, x_feat, other_feat): two shapes that broadcast right-aligned to ``full``."""
    full = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))

    def operand():
        dropped = draw(st.integers(0, len(full)))
        return tuple(1 if draw(st.booleans()) else d for d in full[dropped:])

    return full, operand(), operand()


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(0, 25)),
    shapes=broadcast_case(),
    op=st.sampled_from(["copy", "mul", "add", "sub", "div"]),
    reduce=st.sampled_from(["sum", "mean", "max", "min"]),
    chunk=st.one_of(st.none(), st.integers(1, 6)),
    path=st.sampled_from(PATHS),
    ties=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_spmm_hypothesis(sizes, shapes, op, reduce, chunk, path, ties, seed):
    ns, nd, ne = sizes
    _, xf, wf = shapes
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, ns, (ne,), generator=gen), torch.randint(0, nd, (ne,), generator=gen)
    x = rand(ns, *xf, ties=ties, seed=seed)
    w = None if op == "copy" else rand(ne, *wf, ties=ties, positive=op == "div", seed=seed + 1)
    with kernels(path):
        check_against(
            lambda x, w: spmm(x, src, dst, nd, w, op, reduce, chunk=chunk),
            lambda x, w: naive_spmm(x, src, dst, nd, w, op, reduce),
            [x, w],
            torch.float64,
        )


def naive_scaled_spmm(x, w, src_scale, dst_scale, src, dst, n, reduce):
    def column(scale, like):
        return scale.view((-1,) + (1,) * (like.dim() - 1))

    scaled = x if src_scale is None else x * column(src_scale, x)
    out = naive_spmm(scaled, src, dst, n, w, "mul", reduce)
    return out if dst_scale is None else out * column(dst_scale, out)


def check_scaled_spmm(fn, case, shapes, reduce, sides, dtype):
    """``fn`` (a backend's scaled_spmm) against the naive composition: with constant scales (fused, gradients of
    x and w), and with scales that need a gradient (composed, gradients of the scales too)."""
    ns, nd, src, dst = edges(case)
    xf, wf = shapes
    x = rand(ns, *xf, dtype=dtype)
    w = None if wf is None else rand(src.numel(), *wf, dtype=dtype, seed=2)
    scales = [
        rand(rows, dtype=dtype, seed=3 + i).detach() if side in sides else None
        for i, (side, rows) in enumerate((("src", ns), ("dst", nd)))
    ]
    check_against(
        lambda x, w: fn(x, src, dst, nd, *scales, w, reduce),
        lambda x, w: naive_scaled_spmm(x, w, *scales, src, dst, nd, reduce),
        [x, w],
        dtype,
    )
    learned = [None if s is None else s.requires_grad_() for s in scales]
    check_against(
        lambda x, w, a, b: fn(x, src, dst, nd, a, b, w, reduce),
        lambda x, w, a, b: naive_scaled_spmm(x, w, a, b, src, dst, nd, reduce),
        [x, w, *learned],
        dtype,
    )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("sides", [("src", "dst"), ("src",), ("dst",)])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("shapes", [((4,), None), ((3, 4), (3, 1)), ((4,), ())])
def test_scaled_spmm_matches_the_composition(shapes, reduce, sides, case, path):
    """GCN's node scales inside the sum equal spmm(x * s) * d, forward and gradients, on every sum path."""
    with kernels(path):
        check_scaled_spmm(scaled_spmm, case, shapes, reduce, sides, torch.float64)


def test_scaled_spmm_names_a_scale_of_the_wrong_shape_or_dtype():
    ns, nd, src, dst = edges("multi")
    x = rand(ns, 4).detach()
    with pytest.raises(ValueError, match=rf"src_scale has shape \({ns + 1},\), expected \({ns},\)"):
        scaled_spmm(x, src, dst, nd, torch.ones(ns + 1, dtype=x.dtype), None)
    with pytest.raises(ValueError, match=rf"dst_scale has shape \({nd}, 1\), expected \({nd},\)"):
        scaled_spmm(x, src, dst, nd, None, torch.ones(nd, 1, dtype=x.dtype))
    with pytest.raises(TypeError, match="dst_scale has dtype torch.float32"):
        scaled_spmm(x, src, dst, nd, None, torch.ones(nd))
    with pytest.raises(ValueError, match="sum or mean, not 'max'"):
        scaled_spmm(x, src, dst, nd, None, None, reduce="max")


# ---------- sddmm ----------

SDDMM_SHAPES = {"heads": ((3, 4), (3, 4)), "bcast": ((3, 1), (1, 4)), "vector": ((4,), (3, 4)), "scalar": ((), ())}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shapes", list(SDDMM_SHAPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
def test_sddmm_matches_naive(op, shapes, dtype, path):
    af, bf = SDDMM_SHAPES[shapes]
    if op == "dot" and not af and not bf:
        with pytest.raises(ValueError, match="dot"):
            sddmm(torch.ones(2, dtype=dtype), torch.tensor([0]), torch.ones(2, dtype=dtype), torch.tensor([1]), op)
        return
    for case in CASES:
        ns, nd, src, dst = edges(case)
        a, b = rand(ns, *af, dtype=dtype), rand(nd, *bf, dtype=dtype, positive=op == "div", seed=2)
        with kernels(path):
            for chunk in (None, 6):
                check_against(
                    lambda a, b: sddmm(a, src, b, dst, op, chunk=chunk),
                    lambda a, b: naive_binary(op, a[src], b[dst]),
                    [a, b],
                    dtype,
                )


@pytest.mark.parametrize("slope", [0.2, 0.0, -0.5])
@pytest.mark.parametrize("shapes", ["heads", "bcast"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_sddmm_leaky_relu_epilogue_matches_naive(op, shapes, slope):
    af, bf = SDDMM_SHAPES[shapes]
    for case in CASES:
        ns, nd, src, dst = edges(case)
        a, b = rand(ns, *af), rand(nd, *bf, positive=op == "div", seed=2)
        for path in PATHS:
            with kernels(path):
                check_against(
                    lambda a, b: sddmm(a, src, b, dst, op, negative_slope=slope, chunk=6),
                    lambda a, b: torch.nn.functional.leaky_relu(naive_binary(op, a[src], b[dst]), slope),
                    [a, b],
                    torch.float64,
                )
    ns, nd, src, dst = edges("multi", num_src=5, num_dst=6, num_edges=8)
    a, b = rand(ns, *af), rand(nd, *bf, positive=op == "div", seed=2)
    assert torch.autograd.gradcheck(lambda a, b: sddmm(a, src, b, dst, op, negative_slope=slope, chunk=3), (a, b))


def test_sddmm_epilogue_needs_a_binary_op_and_a_number():
    a, i = torch.ones(2, 3, dtype=torch.float64), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="negative_slope must be a number with a binary op"):
        sddmm(a, i, a, i, "dot", negative_slope=0.2)
    with pytest.raises(ValueError, match="negative_slope must be a number"):
        sddmm(a, i, a, i, "add", negative_slope="0.2")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
def test_sddmm_gradcheck(op):
    ns, nd, src, dst = edges("multi", num_src=5, num_dst=6, num_edges=8)
    a, b = rand(ns, 2, 3), rand(nd, 1, 3, positive=op == "div", seed=2)
    assert torch.autograd.gradcheck(lambda a, b: sddmm(a, src, b, dst, op, chunk=3), (a, b))


# ---------- edge_softmax_aggregate ----------

AGG_SHAPES = {"heads": ((3,), (3, 4)), "single": ((), (4,)), "bcast_x": ((3, 1), (1, 4)), "per_feature": ((4,), (4,))}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 1e4])
@pytest.mark.parametrize("shapes", list(AGG_SHAPES))
def test_edge_softmax_aggregate_matches_naive(shapes, scale, dtype, case, path):
    ns, nd, src, dst = edges(case)
    lf, xf = AGG_SHAPES[shapes]
    logits = (scale * rand(src.numel(), *lf, dtype=dtype)).detach().requires_grad_()
    x = rand(ns, *xf, dtype=dtype, seed=2)
    with kernels(path):
        for chunk in (None, 7):
            check_against(
                lambda logit, x: edge_softmax_aggregate(logit, x, src, dst, nd, chunk=chunk),
                lambda logit, x: naive_softmax_aggregate(logit, x, src, dst, nd),
                [logits, x],
                dtype,
            )


@pytest.mark.parametrize("path", PATHS)
def test_edge_softmax_aggregate_gradcheck(path):
    ns, nd, src, dst = edges("multi", num_src=5, num_dst=6, num_edges=8)
    with kernels(path):
        assert torch.autograd.gradcheck(
            lambda logit, x: edge_softmax_aggregate(logit, x, src, dst, nd, chunk=3),
            (rand(src.numel(), 2), rand(ns, 2, 3, seed=2)),
        )


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(0, 25)),
    shapes=broadcast_case(),
    scale=st.sampled_from([1.0, 1e4]),
    chunk=st.one_of(st.none(), st.integers(1, 6)),
    path=st.sampled_from(PATHS),
    dgl_heads=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_edge_softmax_aggregate_hypothesis(sizes, shapes, scale, chunk, path, dgl_heads, seed):
    ns, nd, ne = sizes
    _, xf, lf = shapes
    if len(lf) == len(xf) - 1:  # keep plain right-aligned broadcasting: that length gets a trailing singleton
        lf = (1,) + lf
    if dgl_heads and xf:  # [E, H] scores against [N, H, F] features
        lf = xf[:-1]
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, ns, (ne,), generator=gen), torch.randint(0, nd, (ne,), generator=gen)
    logits = (scale * rand(ne, *lf, seed=seed)).detach().requires_grad_()
    x = rand(ns, *xf, seed=seed + 1)
    with kernels(path):
        check_against(
            lambda logit, x: edge_softmax_aggregate(logit, x, src, dst, nd, chunk=chunk),
            lambda logit, x: naive_softmax_aggregate(logit, x, src, dst, nd),
            [logits, x],
            torch.float64,
        )


# ---------- sddmm_softmax_aggregate ----------

SSA_SHAPES = {  # a features, b features, x features
    "heads": ((3,), (3,), (3, 4)),
    "gat": ((3, 1), (3, 1), (3, 4)),
    "single": ((), (), (4,)),
    "bcast": ((3, 1), (1, 4), (3, 4)),
}


def sddmm_softmax_aggregate_bad_calls():
    """(keyword arguments, error type, message pattern): calls every backend refuses, naming the culprit."""
    good = dict(
        a=torch.randn(4, 2),
        b=torch.randn(2, 2),
        x=torch.randn(4, 2, 3),
        src=torch.tensor([0, 1, 3]),
        dst=torch.tensor([1, 1, 0]),
        num_dst=2,
    )
    return [
        (dict(good, b=torch.randn(4, 2)), ValueError, r"b has 4 rows, expected one per destination \(num_dst = 2\)"),
        (dict(good, b=torch.randn(2, 2, dtype=torch.float64)), TypeError, "b has dtype torch.float64"),
        (dict(good, x=torch.randn(4, 2, 3, dtype=torch.float64)), TypeError, "x has dtype torch.float64"),
        (dict(good, a=torch.randn(2, 2)), IndexError, "src has entries"),
        (dict(good, dst=torch.tensor([1, 2, 0])), IndexError, "dst has entries"),
        (dict(good, dst=torch.tensor([1, 0])), ValueError, "dst has 2 entries"),
        (dict(good, op="dot"), ValueError, "op must be one of"),
        (dict(good, x=torch.randn(4, 3, 3)), ValueError, r"and x \(3, 3\) do not broadcast"),
        (dict(good, negative_slope="0.2"), ValueError, "negative_slope"),
        (dict(good, b=torch.randn(5, 2), b_index=torch.tensor([0, 5, 1])), IndexError, "b_index has entries"),
        (dict(good, b=torch.randn(5, 2), b_index=torch.tensor([0, 4])), ValueError, "b_index has 2 entries"),
    ]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("slope", [None, 0.0, 0.2])
@pytest.mark.parametrize("shapes", list(SSA_SHAPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_sddmm_softmax_aggregate_matches_composition_and_naive(op, shapes, slope, dtype, case, path):
    ns, nd, src, dst = edges(case)
    af, bf, xf = SSA_SHAPES[shapes]
    a, b = rand(ns, *af, dtype=dtype), rand(nd, *bf, dtype=dtype, positive=op == "div", seed=2)
    x = rand(ns, *xf, dtype=dtype, seed=3)
    with kernels(path):
        check_against(
            lambda a, b, x: sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, negative_slope=slope, chunk=7),
            lambda a, b, x: edge_softmax_aggregate(sddmm(a, src, b, dst, op, negative_slope=slope), x, src, dst, nd),
            [a, b, x],
            dtype,
        )
        check_against(
            lambda a, b, x: sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, negative_slope=slope),
            lambda a, b, x: naive_sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, slope),
            [a, b, x],
            dtype,
        )


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("op", ["add", "div"])
def test_sddmm_softmax_aggregate_reads_b_through_b_index(op, case, path):
    """b holds rows of another table (RGAT: per (relation, destination) pair): edge e reads b[b_index[e]]."""
    ns, nd, src, dst = edges(case)
    b_index = torch.randint(0, 5, (src.numel(),), generator=torch.Generator().manual_seed(1))
    a, b, x = rand(ns, 3), rand(5, 3, positive=op == "div", seed=2), rand(ns, 3, 4, seed=3)
    with kernels(path):
        check_against(
            lambda a, b, x: sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, negative_slope=0.2, b_index=b_index),
            lambda a, b, x: naive_sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, 0.2, b_index),
            [a, b, x],
            torch.float64,
        )


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_sddmm_softmax_aggregate_gradcheck(op):
    ns, nd, src, dst = edges("multi", num_src=5, num_dst=6, num_edges=8)
    inputs = (rand(ns, 2), rand(nd, 2, positive=op == "div", seed=2), rand(ns, 2, 3, seed=3))
    assert torch.autograd.gradcheck(
        lambda a, b, x: sddmm_softmax_aggregate(a, b, x, src, dst, nd, op, negative_slope=0.2, chunk=3), inputs
    )


@pytest.mark.parametrize("call", sddmm_softmax_aggregate_bad_calls())
def test_sddmm_softmax_aggregate_errors_name_the_culprit(call):
    kwargs, error, pattern = call
    with pytest.raises(error, match=pattern):
        sddmm_softmax_aggregate(**kwargs)


# ---------- typed matmuls ----------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("ptr", [[0, 3, 3, 7, 12], [0, 12], [0, 0, 0], [0, 0]])
def test_segment_matmul_matches_naive(ptr, bias, dtype):
    n = ptr[-1]
    x, weight = rand(n, 5, dtype=dtype), rand(len(ptr) - 1, 5, 3, dtype=dtype, seed=2)
    b = rand(len(ptr) - 1, 3, dtype=dtype, seed=3) if bias else None
    for p in (ptr, torch.tensor(ptr)):
        check_against(
            lambda x, w, b: segment_matmul(x, p, w, b),
            lambda x, w, b: naive_segment_matmul(x, ptr, w, b),
            [x, weight, b],
            dtype,
        )


def test_segment_matmul_gradcheck():
    args = (rand(6, 3), rand(3, 3, 2, seed=2), rand(3, 2, seed=3))
    assert torch.autograd.gradcheck(lambda x, w, b: segment_matmul(x, [0, 2, 2, 6], w, b), args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES)
def test_gather_segment_matmul_matches_naive(case, dtype):
    ns, _, src, _ = edges(case)
    e = src.numel()
    ptr = [0, e // 3, e // 3, e]
    x, weight = rand(ns, 5, dtype=dtype), rand(3, 5, 4, dtype=dtype, seed=2)
    for chunk in (None, 4):
        check_against(
            lambda x, w: gather_segment_matmul(x, src, ptr, w, chunk=chunk),
            lambda x, w: naive_gather_segment_matmul(x, src, ptr, w),
            [x, weight],
            dtype,
        )


@pytest.mark.parametrize("buffer", [0, 1 << 30])
def test_gather_segment_matmul_gradient_scattered_per_chunk_or_by_one_sparse_matmul(buffer, monkeypatch):
    from gnnc.backend.pytorch import typed_matmul

    monkeypatch.setattr(typed_matmul, "SCATTER_BUFFER_BYTES", buffer)
    gen = torch.Generator().manual_seed(4)
    src = torch.randint(0, 300, (6000,), generator=gen)  # 6000 x 64 gradient rows: the sparse kernel's size
    ptr = [0, 2500, 2500, 6000]
    x, weight = rand(300, 64, dtype=torch.float64), rand(3, 64, 8, dtype=torch.float64, seed=2)
    check_against(
        lambda x, w: gather_segment_matmul(x, src, ptr, w),
        lambda x, w: naive_gather_segment_matmul(x, src, ptr, w),
        [x, weight],
        torch.float64,
    )


def test_gather_segment_matmul_gradcheck():
    ns, _, src, _ = edges("multi", num_src=5, num_edges=8)
    assert torch.autograd.gradcheck(
        lambda x, w: gather_segment_matmul(x, src, [0, 4, 4, src.numel()], w, chunk=3),
        (rand(ns, 3), rand(3, 3, 2, seed=2)),
    )


# ---------- memory contract, structure cache, errors ----------


def _saved_numels(out):
    return [t.numel() for t in out.grad_fn.saved_tensors if t is not None]


@pytest.mark.parametrize("path", PATHS)
def test_backward_saves_no_edge_by_feature_tensor(path):
    ns, nd, src, dst = edges("multi", num_src=6, num_dst=8, num_edges=300)
    e, heads, feats = src.numel(), 2, 16
    x, w, logits = rand(ns, heads, feats), rand(e, heads, 1, seed=2), rand(e, heads, seed=3)
    message = e * heads * feats
    with kernels(path):
        outs = [spmm(x, src, dst, nd, w, op, reduce) for op in ("mul", "add") for reduce in ("sum", "max")]
        outs += [sddmm(x, src, x, dst, op) for op in ("mul", "dot")]
        outs += [
            edge_softmax_aggregate(logits, x, src, dst, nd),
            segment_reduce(rand(e, heads, feats), dst, nd, "max"),
            gather_segment_matmul(x[:, 0], src, [0, e], rand(1, feats, feats)),
        ]
    for out in outs:
        assert max(_saved_numels(out)) < message // 4, out.grad_fn


def test_sums_keep_their_operands_only_for_each_others_gradient():
    """A sum / mean keeps x for backward only when its edge weight needs a gradient, and the weight only when
    x does: [N, F] rows or [E, ...] weights would otherwise outlive the forward for nothing (R-GCN's per-pair
    transform and edge norm, GCN's projection)."""
    ns, nd, src, dst = edges("multi")
    x = rand(ns, 3, 4)
    w = rand(src.numel(), 3, 1, seed=2)
    scale = rand(ns, seed=3).detach()

    def keeps(t, out):
        return any(s is not None and s.data_ptr() == t.data_ptr() for s in out.grad_fn.saved_tensors)

    for reduce in ("sum", "mean"):
        assert not keeps(x, spmm(x, src, dst, nd, None, "copy", reduce))
        assert not keeps(x, scaled_spmm(x, src, dst, nd, scale, None, reduce=reduce))
        out = spmm(x, src, dst, nd, w.detach(), "mul", reduce)
        assert not keeps(x, out) and keeps(w, out)
        out = spmm(x.detach(), src, dst, nd, w, "mul", reduce)
        assert keeps(x, out) and not keeps(w, out)
        out = spmm(x, src, dst, nd, w, "mul", reduce)
        assert keeps(x, out) and keeps(w, out)


def naive_head_dot(x, weights):
    return (x.unsqueeze(1) * weights.unsqueeze(0)).sum(-1).transpose(1, 2)  # [rows, K, H] -> [rows, H, K]


@pytest.mark.parametrize("rows, heads, feats, k", [(7, 3, 4, 2), (5, 1, 6, 1), (1, 8, 8, 3), (0, 2, 3, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_head_dot_matches_naive(rows, heads, feats, k, dtype):
    check_against(
        head_dot,
        naive_head_dot,
        [rand(rows, heads, feats, dtype=dtype), rand(k, heads, feats, dtype=dtype, seed=1)],
        dtype,
    )


def test_head_dot_gradcheck_and_errors():
    assert torch.autograd.gradcheck(head_dot, (rand(5, 2, 3), rand(2, 2, 3, seed=1)))
    with pytest.raises(ValueError, match=r"weights \[K, H, F\]"):
        head_dot(torch.randn(4, 2, 3), torch.randn(2, 3, 3))
    with pytest.raises(TypeError, match="weights has dtype"):
        head_dot(torch.randn(4, 2, 3), torch.randn(2, 2, 3, dtype=torch.float64))


def test_structure_cache_sees_in_place_changes():
    clear_structure_cache()
    ns, nd, src, dst = edges("multi")
    x = rand(ns, 4).detach()
    before = spmm(x, src, dst, nd)
    dst2 = dst.clone()
    assert torch.equal(spmm(x, src, dst2, nd), before)
    dst2.copy_(dst.flip(0))
    torch.testing.assert_close(spmm(x, src, dst2, nd), naive_spmm(x, src, dst.flip(0), nd, None, "copy", "sum"))


@pytest.mark.parametrize("case", ["multi", "no_edges", "one_node", "sorted"])
@pytest.mark.parametrize("with_cols", [False, True])
def test_cpu_structures_hold_int32_indices_where_the_ids_fit(case, with_cols):
    """On the CPU a CSR structure is int32 (half the cached bytes; MKL reads it unconverted), int64 once an
    id would not fit; either way its rows are the stable sort of the edges by row."""
    ns, nd, src, dst = edges(case)
    if case == "sorted":
        dst, order = torch.sort(dst, stable=True)
        src = src[order]
    cols = src if with_cols else None
    for limit, dtype in ((csr.INT32_MAX, torch.int32), (0, torch.int64)):
        clear_structure_cache()
        with mock.patch.object(csr, "INT32_MAX", limit):
            s = csr.csr_structure(dst, nd, cols)
        assert s.crow.dtype == s.col.dtype == s.perm.dtype == dtype
        perm = torch.sort(dst, stable=True).indices
        assert torch.equal(s.perm.long(), perm)
        assert torch.equal(s.col.long(), perm if cols is None else cols[perm])
        assert torch.equal(
            s.crow.long(), torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(dst, minlength=nd).cumsum(0)])
        )
    clear_structure_cache()


def test_errors_name_the_culprit():
    x, src, dst = torch.randn(4, 3), torch.tensor([0, 1, 3]), torch.tensor([1, 1, 0])
    with pytest.raises(IndexError, match="src"):
        spmm(x, torch.tensor([0, 4, 1]), dst, 2)
    with pytest.raises(IndexError, match="dst"):
        spmm(x, src, dst, 1)
    with pytest.raises(TypeError, match="dst"):
        spmm(x, src, dst.int(), 2)
    with pytest.raises(ValueError, match="edge_weight"):
        spmm(x, src, dst, 2, torch.randn(3, 2), "mul")
    with pytest.raises(ValueError, match="needs an edge_weight"):
        spmm(x, src, dst, 2, None, "add")
    with pytest.raises(ValueError, match="reduce"):
        spmm(x, src, dst, 2, reduce="prod")
    with pytest.raises(ValueError, match="ptr"):
        segment_matmul(x, [0, 3], torch.randn(1, 3, 2))
    with pytest.raises(ValueError, match="weight"):
        gather_segment_matmul(x, src, [0, 1, 3], torch.randn(3, 3, 2))
    with pytest.raises(TypeError, match="values"):
        segment_reduce(torch.ones(3, dtype=torch.long), dst, 2)


def test_cached_index_check_sees_in_place_changes():
    dst = torch.tensor([0, 1, 1])
    values = torch.ones(3, 2)
    segment_reduce(values, dst, 2, "sum")  # checked and remembered
    dst[2] = 7
    with pytest.raises(IndexError, match=r"dst has entries in \[0, 7\], outside \[0, 2\)"):
        segment_reduce(values, dst, 2, "sum")
