"""gnnc.backend.cpu (numba kernels) against the torch reference backend, and backend selection.

Forward and both gradients of the fused edge softmax + aggregation on index
sets with zero in-degree nodes, self loops, multi-edges, unsorted
destinations, no edges, one node and large logits, for every broadcast
layout; one-thread and parallel launches; constant-width and runtime-width
kernels; gradcheck in float64. SDDMM with every binary operator against a
naive gather. End to end: a compiled GAT on the cpu backend equals the
torch backend and eager.
"""

from __future__ import annotations

import importlib
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

import gnnc
from gnnc import backend
from gnnc.backend import cpu as cpu_backend
from gnnc.backend import pytorch as torch_backend
from gnnc.backend.cpu import interop, softmax_aggregate
from gnnc.models.gat import GATConv

from .graphs import random_heterograph, random_homograph
from .test_backend_torch import (
    SDDMM_SHAPES,
    SPMM_SHAPES,
    check_against,
    check_scaled_spmm,
    edges,
    naive_binary,
    naive_spmm,
    rand,
    sddmm_softmax_aggregate_bad_calls,
)

cpu_spmm = importlib.import_module("gnnc.backend.cpu.spmm")  # the package exports the function of that name

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-9, atol=1e-11)}
# (logits feature shape, x feature shape)
LAYOUTS = [((3,), (3, 4)), ((), (5,)), ((2, 1), (5,)), ((1,), (3, 4)), ((2, 3), (2, 3)), ((2, 1, 1), (2, 3, 4))]


def _edges(case: str, num_nodes: int, num_edges: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    if case == "no_edges":
        return torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), num_nodes
    if case == "one_node":
        return torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int64), 1
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, max(1, num_nodes - 3), (num_edges,), generator=gen)  # the last 3 get no in-edges
    loops = torch.arange(3)
    return torch.cat([src, loops, src[:4]]), torch.cat([dst, loops, dst[:4]]), num_nodes


def _run(kernels, logits, x, src, dst, num_dst, grad):
    return _with_grads(lambda logit, v: kernels.edge_softmax_aggregate(logit, v, src, dst, num_dst), (logits, x), grad)


def _with_grads(fn, inputs, grad, needed=None):
    """(fn(*inputs), *gradients for the upstream ``grad``), differentiating the inputs ``needed`` marks (all)."""
    needed = needed or [True] * len(inputs)
    inputs = [t.detach().requires_grad_(n) for t, n in zip(inputs, needed)]
    out = fn(*inputs)
    return (out, *torch.autograd.grad(out, [t for t in inputs if t.requires_grad], grad, allow_unused=True))


# Kernels are generated per (logit form, head/feature shape, dtype), at a cold compile of seconds each: the
# matrices below vary what does not change a kernel (graph case, launch, slope) freely, and what does sparsely.
LAYOUT_DTYPES = [(layout, torch.float64) for layout in LAYOUTS] + [(LAYOUTS[0], torch.float32)]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("layout, dtype", LAYOUT_DTYPES)
@pytest.mark.parametrize("case", ["multi", "no_edges", "one_node", "large_logits"])
def test_edge_softmax_aggregate_matches_torch(dtype, case, layout, parallel):
    src, dst, n = _edges(case, 23, 70, seed=len(case))
    gen = torch.Generator().manual_seed(1)
    scale = 1e3 if case == "large_logits" else 1.0
    logits = torch.randn((src.numel(),) + layout[0], generator=gen, dtype=dtype) * scale
    x = torch.randn((n,) + layout[1], generator=gen, dtype=dtype)
    out_shape = torch_backend.edge_softmax_aggregate(logits, x, src, dst, n).shape
    grad = torch.randn(out_shape, generator=gen, dtype=dtype)
    threshold = 0 if parallel else interop.PARALLEL_MIN_WORK
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
        got = _run(cpu_backend, logits, x, src, dst, n, grad)
    want = _run(torch_backend, logits, x, src, dst, n, grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[dtype])


def test_gradcheck():
    src, dst, n = _edges("multi", 9, 25, seed=3)
    logits = torch.randn(src.numel(), 3, dtype=torch.float64, requires_grad=True)
    x = torch.randn(n, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda logit, v: cpu_backend.edge_softmax_aggregate(logit, v, src, dst, n), (logits, x)
    )


@pytest.mark.parametrize(
    "heads, feats, max_block, launches, dtype",
    [(8, 8, softmax_aggregate.MAX_BLOCK, 1, torch.float32), (4, 5, 8, 3, torch.float64), (10, 1, 8, 2, torch.float32)],
)
def test_blocks_of_wide_rows(heads, feats, max_block, launches, dtype):
    """Rows of up to MAX_BLOCK accumulators run as one launch of a generated kernel (GAT's 8 heads of 8);
    wider ones, in heads, features or both, as several blocks (shown with a smaller MAX_BLOCK). Every split
    matches the torch backend forward and backward, on one thread and in parallel."""
    with mock.patch.object(softmax_aggregate, "MAX_BLOCK", max_block):
        assert len(softmax_aggregate.blocks(heads, feats)) == launches
        src, dst, n = _edges("multi", 37, 260, seed=heads * feats)
        gen = torch.Generator().manual_seed(heads + feats)
        logits = torch.randn(src.numel(), heads, generator=gen, dtype=dtype) * 10
        x = torch.randn(n, heads, feats, generator=gen, dtype=dtype)
        grad = torch.randn(n, heads, feats, generator=gen, dtype=dtype)
        want = _run(torch_backend, logits, x, src, dst, n, grad)
        for threshold in (0, interop.PARALLEL_MIN_WORK):
            with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
                got = _run(cpu_backend, logits, x, src, dst, n, grad)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, **TOL[dtype])
        a, b = rand(n, heads, seed=1) * 5, rand(n, heads, seed=2)
        _ssa_against_torch(a.to(dtype), b.to(dtype), x, src, dst, n, "mul", 0.2, dtype)


def test_blocks_cover_every_accumulator_once():
    for heads, feats in [(8, 8), (16, 16), (1, 300), (200, 1), (129, 3), (5, 0)]:
        covered = torch.zeros(heads, feats, dtype=torch.int64)
        for block in softmax_aggregate.blocks(heads, feats):
            assert block.heads * block.feats <= softmax_aggregate.MAX_BLOCK
            covered[block.h0 : block.h0 + block.heads, block.f0 : block.f0 + block.feats] += 1
        assert bool((covered == 1).all())


SHAPES = [(3, 4), (1, 5), (2, 5)]  # (heads, features) that the layout matrices compile


@settings(max_examples=25, deadline=None)
@given(
    num_nodes=st.integers(1, 30), num_edges=st.integers(0, 80), shape=st.sampled_from(SHAPES), seed=st.integers(0, 1000)
)
def test_random_graphs(num_nodes, num_edges, shape, seed):
    heads, feats = shape
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    logits = torch.randn(num_edges, heads, generator=gen, dtype=torch.float64) * 20
    x = torch.randn(num_nodes, heads, feats, generator=gen, dtype=torch.float64)
    grad = torch.randn(num_nodes, heads, feats, generator=gen, dtype=torch.float64)
    got = _run(cpu_backend, logits, x, src, dst, num_nodes, grad)
    want = _run(torch_backend, logits, x, src, dst, num_nodes, grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])


def test_bad_input_is_named():
    src = torch.tensor([0, 5])
    with pytest.raises(IndexError, match="src"):
        cpu_backend.edge_softmax_aggregate(torch.randn(2, 1), torch.randn(3, 1, 2), src, torch.tensor([0, 1]), 3)
    with pytest.raises(TypeError, match="logits has dtype"):
        cpu_backend.edge_softmax_aggregate(
            torch.randn(2, 1), torch.randn(3, 1, 2, dtype=torch.float64), torch.tensor([0, 1]), torch.tensor([0, 1]), 3
        )


# (a and b features, x features): one shape for a and b runs fused
SSA_LAYOUTS = [((3,), (3, 4)), ((3, 1), (3, 4)), ((), (5,)), ((2, 3), (2, 3)), ((1,), (3, 4)), ((1, 3), (2, 3))]


def _ssa_inputs(case: str, af, xf, op: str, dtype):
    """(src, dst, n, a, b, x): b away from 0 for div, a scaled to logits of ~50-100 for large_logits."""
    src, dst, n = _edges(case, 23, 70, seed=len(case))
    scale = 60.0 if case == "large_logits" else 1.0
    a = rand(n, *af, dtype=dtype).detach() * scale
    b = rand(n, *af, dtype=dtype, positive=op == "div", seed=1)
    return src, dst, n, a, b, rand(n, *xf, dtype=dtype, seed=2)


def _ssa_against_torch(a, b, x, src, dst, n, op, slope, dtype, needed=None, b_index=None):
    """The cpu backend's sddmm_softmax_aggregate equals the torch backend's, forward and gradients.

    Absolute tolerances scale with each tensor's largest entry: an ulp of a
    logit that one backend rounds differently (a fused multiply-add) moves a
    gradient sum in proportion to the scores it multiplies (grad_b = sum of
    grad_logit * a for mul), and large logits come from large scores.
    """

    def primitive(kernels):
        return lambda a, b, x: kernels.sddmm_softmax_aggregate(
            a, b, x, src, dst, n, op, negative_slope=slope, b_index=b_index
        )

    shape = primitive(torch_backend)(a, b, x).shape
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(7), dtype=dtype)
    results = [_with_grads(primitive(kernels), (a, b, x), grad, needed) for kernels in (cpu_backend, torch_backend)]
    for got, want in zip(*results):
        scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
        torch.testing.assert_close(got, want, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * scale)


SSA_FORMS = [
    (op, SSA_LAYOUTS[0], dtype) for op in ("add", "sub", "mul", "div") for dtype in (torch.float32, torch.float64)
] + [("add", layout, torch.float64) for layout in SSA_LAYOUTS[1:]]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("case", ["multi", "no_edges", "one_node", "large_logits"])
@pytest.mark.parametrize("slope", [None, 0.0, 0.2])
@pytest.mark.parametrize("op, layout, dtype", SSA_FORMS)
def test_sddmm_softmax_aggregate_matches_torch(op, layout, dtype, slope, case, parallel):
    src, dst, n, a, b, x = _ssa_inputs(case, *layout, op, dtype)
    threshold = 0 if parallel else interop.PARALLEL_MIN_WORK
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
        _ssa_against_torch(a, b, x, src, dst, n, op, slope, dtype)


@pytest.mark.parametrize(
    "needed", [(True, False, False), (False, True, False), (False, False, True), (True, True, False)]
)
def test_sddmm_softmax_aggregate_partial_grads(needed):
    """Only the requested gradients are computed, each still right."""
    src, dst, n, a, b, x = _ssa_inputs("multi", (3,), (3, 4), "mul", torch.float64)
    _ssa_against_torch(a, b, x, src, dst, n, "mul", 0.2, torch.float64, list(needed))


@pytest.mark.parametrize("shapes", [((3, 1), (1, 4), (3, 4)), ((3,), (1,), (3, 4)), ((1,), (2, 3), (2, 3, 4))])
@pytest.mark.parametrize("op", ["add", "div"])
def test_sddmm_softmax_aggregate_composed_layouts(op, shapes):
    """a and b of different feature shapes (broadcast): the composition of the cpu sddmm and aggregation."""
    af, bf, xf = shapes
    src, dst, n = _edges("multi", 23, 70, seed=2)
    a, b = rand(n, *af), rand(n, *bf, positive=op == "div", seed=1)
    for slope in (None, 0.2):
        _ssa_against_torch(a, b, rand(n, *xf, seed=2), src, dst, n, op, slope, torch.float64)


def test_sddmm_softmax_aggregate_saves_no_edge_tensor():
    """The fused path keeps no [E, ...] float tensor for backward; the composition keeps the logits."""
    src, dst, n = _edges("multi", 20, 400, seed=4)
    a, b, x = (t.requires_grad_() for t in (torch.randn(n, 3), torch.randn(n, 3), torch.randn(n, 3, 4)))

    def edge_rows(out):
        return [
            t
            for t in out.grad_fn.saved_tensors
            if t is not None and t.is_floating_point() and t.shape[0] == src.numel()
        ]

    assert not edge_rows(cpu_backend.sddmm_softmax_aggregate(a, b, x, src, dst, n, negative_slope=0.2))
    assert edge_rows(torch_backend.sddmm_softmax_aggregate(a, b, x, src, dst, n, negative_slope=0.2))


def _pair_rows(dst: torch.Tensor, num_rels: int, seed: int) -> tuple[torch.Tensor, int]:
    """Each edge's (relation, destination) pair under random relations, and the number of pairs: the
    rows RGAT's destination scores are computed on."""
    rel = torch.randint(0, num_rels, (dst.numel(),), generator=torch.Generator().manual_seed(seed))
    pairs, b_index = torch.unique(rel * (int(dst.max()) + 1 if dst.numel() else 1) + dst, return_inverse=True)
    return b_index, pairs.numel()


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("case", ["multi", "no_edges", "one_node", "large_logits"])
@pytest.mark.parametrize("slope", [None, 0.2])
@pytest.mark.parametrize("op, layout, dtype", SSA_FORMS)
def test_sddmm_softmax_aggregate_with_pair_rows_of_b_matches_torch(op, layout, dtype, slope, case, parallel):
    """b per (relation, destination) pair, read through ``b_index``: fused, with b's gradient summed by pair."""
    src, dst, n, a, _, x = _ssa_inputs(case, *layout, op, dtype)
    b_index, num_pairs = _pair_rows(dst, 3, seed=5)
    b = rand(num_pairs, *layout[0], dtype=dtype, positive=op == "div", seed=1)
    threshold = 0 if parallel else interop.PARALLEL_MIN_WORK
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
        _ssa_against_torch(a, b, x, src, dst, n, op, slope, dtype, b_index=b_index)


@pytest.mark.parametrize("needed", [(True, False, False), (False, True, False), (False, False, True)])
def test_sddmm_softmax_aggregate_with_pair_rows_partial_grads_and_no_edge_tensor(needed):
    src, dst, n = _edges("multi", 20, 400, seed=4)
    b_index, num_pairs = _pair_rows(dst, 4, seed=6)
    a, b, x = (
        torch.randn(n, 3, dtype=torch.float64),
        torch.randn(num_pairs, 3, dtype=torch.float64),
        torch.randn(n, 3, 4, dtype=torch.float64),
    )
    _ssa_against_torch(a, b, x, src, dst, n, "add", 0.2, torch.float64, list(needed), b_index=b_index)
    out = cpu_backend.sddmm_softmax_aggregate(
        *(t.requires_grad_() for t in (a, b, x)), src, dst, n, negative_slope=0.2, b_index=b_index
    )
    assert not [
        t for t in out.grad_fn.saved_tensors if t is not None and t.is_floating_point() and t.shape[0] == src.numel()
    ]


@pytest.mark.parametrize("pairs", [False, True])
def test_sddmm_softmax_aggregate_backward_allocates_no_edge_tensor(pairs):
    """SDDMM logits' gradients come from the source loop: the backward allocates nothing of edge size, and
    its gradients still equal the torch backend's (on two threads: b's rows summed from two ranges).
    Blocks of features: ``test_blocks_of_wide_rows``."""
    src, dst, n = _edges("multi", 20, 400, seed=4)
    b_index, num_pairs = _pair_rows(dst, 3, seed=6) if pairs else (None, n)
    a, b, x = rand(n, 3), rand(num_pairs, 3, seed=1), rand(n, 3, 4, seed=2)
    shapes = []

    def recording_empty(shape, like, dtype=None):
        shapes.append(tuple(shape))
        return interop.empty(shape, like, dtype)

    out = cpu_backend.sddmm_softmax_aggregate(
        *(t.clone().requires_grad_() for t in (a, b, x)), src, dst, n, negative_slope=0.2, b_index=b_index
    )
    with mock.patch.object(softmax_aggregate, "empty", recording_empty):
        out.backward(torch.randn_like(out))
    assert shapes and not [s for s in shapes if s[0] == src.numel()]
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", 0):
        _ssa_against_torch(a, b, x, src, dst, n, "add", 0.2, torch.float64, b_index=b_index)


# (3, 4) and (1, 64) pass even with reassociation and contraction; these two fail with either
@pytest.mark.parametrize("heads, feats, dtype", [(8, 8, torch.float32), (2, 20, torch.float64)])
def test_sddmm_softmax_aggregate_saturated_softmax_has_exactly_zero_logit_gradient(heads, feats, dtype):
    """Where one in-edge takes all the weight, d - t is exactly 0: the source loop recomputes d = g . x
    rounded as the destination loop rounded it into t. One rounding apart would leave eps * |d| in
    b's gradient, which sums the logit gradients of v's in-edges."""
    n = 200  # destination v < 100 has in-edges from 100 + v (score 200: all the weight) and (v + 1) % 100
    v = torch.arange(100)
    src, dst = torch.cat([100 + v, (v + 1) % 100]), torch.cat([v, v])
    a = torch.cat([torch.zeros(100, heads), torch.full((100, heads), 200.0)]).to(dtype).requires_grad_()
    b = torch.zeros(n, heads, dtype=dtype, requires_grad=True)
    x = (rand(n, heads, feats, seed=3) * 1e3).to(dtype).requires_grad_()
    out = cpu_backend.sddmm_softmax_aggregate(a, b, x, src, dst, n)
    out.backward(rand(n, heads, feats, seed=4).to(dtype))
    assert bool((b.grad == 0).all()) and bool((a.grad[100:] == 0).all())


def test_sddmm_softmax_aggregate_gradcheck():
    src, dst, n = _edges("multi", 9, 25, seed=3)
    for op in ("add", "sub", "mul", "div"):
        a, b = rand(n, 3), rand(n, 3, positive=op == "div", seed=1)
        assert torch.autograd.gradcheck(
            lambda a, b, x: cpu_backend.sddmm_softmax_aggregate(a, b, x, src, dst, n, op, negative_slope=0.2),
            (a, b, rand(n, 3, 4, seed=2)),
        )


@settings(max_examples=25, deadline=None)
@given(
    num_nodes=st.integers(1, 30),
    num_edges=st.integers(0, 80),
    op=st.sampled_from(["add", "sub", "mul", "div"]),
    slope=st.sampled_from([None, 0.0, 0.2]),
    seed=st.integers(0, 1000),
)
def test_sddmm_softmax_aggregate_random_graphs(num_nodes, num_edges, op, slope, seed):
    heads, feats = SHAPES[0]
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    a = rand(num_nodes, heads, seed=seed) * 20
    b = rand(num_nodes, heads, positive=op == "div", seed=seed + 1)
    x = rand(num_nodes, heads, feats, seed=seed + 2)
    _ssa_against_torch(a, b, x, src, dst, num_nodes, op, slope, torch.float64)
    b_index, num_pairs = _pair_rows(dst, 3, seed)
    b = rand(num_pairs, heads, positive=op == "div", seed=seed + 1)
    _ssa_against_torch(a, b, x, src, dst, num_nodes, op, slope, torch.float64, b_index=b_index)


@pytest.mark.parametrize("call", sddmm_softmax_aggregate_bad_calls())
def test_sddmm_softmax_aggregate_bad_input_is_named(call):
    kwargs, error, pattern = call
    with pytest.raises(error, match=pattern):
        cpu_backend.sddmm_softmax_aggregate(**kwargs)


def test_resolve():
    assert backend.resolve("auto", torch.device("cpu")) == "cpu"
    assert backend.resolve("auto", "meta") == "torch"
    assert backend.resolve("torch", "cpu") == "torch"
    with pytest.raises(ValueError, match="CPU tensors only"):
        backend.resolve("cpu", "meta")
    with pytest.raises(ValueError, match="unknown backend 'gpu2'"):
        backend.resolve("gpu2", "cpu")
    with mock.patch.object(backend, "cpu_available", return_value=False):
        assert backend.resolve("auto", "cpu") == "torch"
        with pytest.raises(ImportError, match="numba"):
            backend.resolve("cpu", "cpu")
    with pytest.raises(ValueError, match="unknown backend"):
        gnnc.compile(torch.nn.Linear(1, 1), backend="numba")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_gat_same_on_every_backend(dtype):
    g = random_homograph(40, 160, seed=5)
    torch.manual_seed(0)
    model = GATConv(6, 4, 3).to(dtype)
    x = torch.randn(40, 6, dtype=dtype, requires_grad=True)
    results = {}
    for name in ("eager", "torch", "cpu"):
        run = model if name == "eager" else gnnc.compile(model, backend=name)
        out = run(g, x)
        grads = torch.autograd.grad(out.square().sum(), [x, *model.parameters()])
        results[name] = (out, *grads)
    for name in ("torch", "cpu"):
        for got, want in zip(results[name], results["eager"]):
            torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("layer", ["gcn", "sage", "rgcn", "gmm", "hgt"])
def test_compiled_sum_aggregations_match_eager_on_the_numba_sum(layer):
    """GCN, GraphSAGE-mean, R-GCN (per-pair sums), MoNet (three 64-wide kernels as heads) and HGT (its
    attention scores' gradients: narrow heads) compiled on the cpu backend, with the numba sum taking every
    size, equal eager in float64: outputs and every gradient."""
    from gnnc.models.gcn import GCNConv
    from gnnc.models.hgt import HGTConv
    from gnnc.models.monet import GMMConv
    from gnnc.models.rgcn import RGCNConv
    from gnnc.models.sage import SAGEConv

    torch.manual_seed(0)
    g = random_heterograph(seed=3) if layer in ("rgcn", "hgt") else random_homograph(40, 160, seed=5)
    width = 8 if layer == "hgt" else 6
    model = {
        "gcn": lambda: GCNConv(6, 5),
        "sage": lambda: SAGEConv(6, 5, "mean"),
        "rgcn": lambda: RGCNConv(6, 5, len(g.canonical_etypes)),
        "gmm": lambda: GMMConv(6, 64, 2, 3, aggregator="mean"),
        "hgt": lambda: HGTConv(8, 8, len(g.ntypes), len(g.canonical_etypes), num_heads=2),
    }[layer]().double()
    x = torch.randn(g.num_nodes(), width, dtype=torch.float64, requires_grad=True)
    extra = (torch.rand(g.num_edges(), 2, dtype=torch.float64),) if layer == "gmm" else ()
    results = {}
    with mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0):
        for name in ("eager", "cpu"):
            run = model if name == "eager" else gnnc.compile(model, backend=name)
            out = run(g, x, *extra)
            results[name] = (out, *torch.autograd.grad(out.square().sum(), [x, *model.parameters()]))
    for got, want in zip(results["cpu"], results["eager"]):
        torch.testing.assert_close(got, want, **TOL[torch.float64])


def test_explain_names_the_backend():
    g = random_homograph(10, 30, seed=1)
    text = gnnc.explain(GATConv(3, 2, 2).eval(), g, torch.randn(10, 3))
    assert "[backend cpu]" in text
    assert "[backend torch]" in gnnc.explain(GATConv(3, 2, 2).eval(), g, torch.randn(10, 3), backend="torch")


def test_concurrent_calls_from_threads():
    """Kernels launched from several threads at once (each launch may split its rows among threads too)
    give the same results: numba's workqueue pool would abort on concurrent parallel launches, so those
    take turns; the generated kernels run concurrently."""
    from concurrent.futures import ThreadPoolExecutor

    src, dst, n = _edges("multi", 200, 3000, seed=9)
    logits = torch.randn(src.numel(), 3, dtype=torch.float64)
    x = torch.randn(n, 3, 4, dtype=torch.float64)
    want = torch_backend.edge_softmax_aggregate(logits, x, src, dst, n)
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", 0), ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cpu_backend.edge_softmax_aggregate(logits, x, src, dst, n), range(16)))
    for got in results:
        torch.testing.assert_close(got, want, **TOL[torch.float64])


@pytest.mark.parametrize("rows, heads, feats, k", [(300, 8, 8, 2), (7, 3, 4, 1), (0, 2, 3, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_head_dot_matches_torch(rows, heads, feats, k, dtype):
    """Same values and gradients as the torch backend; each weight's scores are one contiguous [rows, H] block."""
    x, w = rand(rows, heads, feats, dtype=dtype), rand(k, heads, feats, dtype=dtype, seed=1)
    grad = rand(rows, heads, k, dtype=dtype, seed=2).detach()
    for threshold in (0, interop.PARALLEL_MIN_WORK):
        with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
            got = _with_grads(cpu_backend.head_dot, (x, w), grad)
        for g, want in zip(got, _with_grads(torch_backend.head_dot, (x, w), grad)):
            torch.testing.assert_close(g, want, **TOL[dtype])
        assert all(got[0][..., j].is_contiguous() for j in range(k))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shapes", list(SDDMM_SHAPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
def test_sddmm_matches_naive(op, shapes, dtype):
    """Same feature shapes run the numba edge loop (dot too); broadcast shapes run on the torch backend."""
    af, bf = SDDMM_SHAPES[shapes]
    if op == "dot" and not af and not bf:
        with pytest.raises(ValueError, match="dot"):
            cpu_backend.sddmm(
                torch.ones(2, dtype=dtype), torch.tensor([0]), torch.ones(2, dtype=dtype), torch.tensor([1]), op
            )
        return
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        a, b = rand(ns, *af, dtype=dtype), rand(nd, *bf, dtype=dtype, positive=op == "div", seed=2)
        for threshold in (0, interop.PARALLEL_MIN_WORK):
            with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
                check_against(
                    lambda a, b: cpu_backend.sddmm(a, src, b, dst, op),
                    lambda a, b: naive_binary(op, a[src], b[dst]),
                    [a, b],
                    dtype,
                )


@pytest.mark.parametrize("width", [8, 3])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_sddmm_leaky_relu_epilogue(op, width):
    """The activation inside the numba edge loop; its backward (the torch backend's) recomputes the sign."""
    for dtype in (torch.float32, torch.float64):
        ns, nd, src, dst = edges("multi")
        a, b = rand(ns, 2, width, dtype=dtype), rand(nd, 2, width, dtype=dtype, seed=2)
        for slope in (0.2, 0.0):
            check_against(
                lambda a, b: cpu_backend.sddmm(a, src, b, dst, op, negative_slope=slope),
                lambda a, b: torch.nn.functional.leaky_relu(naive_binary(op, a[src], b[dst]), slope),
                [a, b],
                dtype,
            )


def test_sddmm_bad_input_is_named():
    with pytest.raises(IndexError, match="b_index"):
        cpu_backend.sddmm(torch.randn(3, 2), torch.tensor([0, 1]), torch.randn(3, 2), torch.tensor([0, 3]), "add")
    with pytest.raises(ValueError, match="op"):
        cpu_backend.sddmm(torch.randn(3, 2), torch.tensor([0]), torch.randn(3, 2), torch.tensor([0]), "pow")


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("feat", [(8,), (2, 3), ()])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_spmm_extremum_matches_naive(reduce, feat, dtype):
    """Max/min of gathered rows in one numba loop: ties to the smallest edge id (integer-valued inputs tie
    often), zero without in-edges, gradients to the arg edge; weighted max/min runs on torch."""
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        for ties in (False, True):
            x = rand(ns, *feat, dtype=dtype, ties=ties)
            for threshold in (0, interop.PARALLEL_MIN_WORK):
                with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
                    check_against(
                        lambda x: cpu_backend.spmm(x, src, dst, nd, op="copy", reduce=reduce),
                        lambda x: naive_spmm(x, src, dst, nd, None, "copy", reduce),
                        [x],
                        dtype,
                    )
    ns, nd, src, dst = edges("multi")
    w = rand(src.numel(), *feat, dtype=dtype, seed=3)
    x = rand(ns, *feat, dtype=dtype)
    check_against(
        lambda x, w: cpu_backend.spmm(x, src, dst, nd, w, "mul", reduce),
        lambda x, w: naive_spmm(x, src, dst, nd, w, "mul", reduce),
        [x, w],
        dtype,
    )


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize(
    "shapes", list(SPMM_SHAPES) + ["wide", "one_wide_head", "odd_width", "empty_rows", "wide_heads", "wide_odd_heads"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_spmm_sum_matches_naive(reduce, shapes, dtype):
    """Weighted (per head, per element, one scalar) and plain sums and means in one numba loop over
    destinations, forward and both gradients: zero without in-edges, multi-edges, no edges, one node;
    one-thread and parallel launches; constant widths (4, 64) and run-time widths (5, 65); one head, narrow
    and wide heads; the small sizes here reach the numba loop with its size floor lowered."""
    xf, wf = {
        "wide": ((8, 8), (8, 1)),
        "one_wide_head": ((64,), (1,)),
        "odd_width": ((5,), ()),
        "empty_rows": ((0,), ()),
        "wide_heads": ((2, 64), (2, 1)),
        "wide_odd_heads": ((3, 65), (3, 1)),
    }.get(shapes) or SPMM_SHAPES[shapes]
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        x = rand(ns, *xf, dtype=dtype)
        w = rand(src.numel(), *wf, dtype=dtype, seed=2)
        for threshold in (0, interop.PARALLEL_MIN_WORK):
            with (
                mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold),
                mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0),
            ):
                check_against(
                    lambda x, w: cpu_backend.spmm(x, src, dst, nd, w, "mul", reduce),
                    lambda x, w: naive_spmm(x, src, dst, nd, w, "mul", reduce),
                    [x, w],
                    dtype,
                )
                check_against(
                    lambda x: cpu_backend.spmm(x, src, dst, nd, op="copy", reduce=reduce),
                    lambda x: naive_spmm(x, src, dst, nd, None, "copy", reduce),
                    [x],
                    dtype,
                )


@pytest.mark.parametrize("sides", [("src", "dst"), ("src",), ("dst",)])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("shapes", [((64,), None), ((5,), None), ((3, 4), (3, 1)), ((2, 64), (2, 1)), ((4,), ())])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_spmm_in_the_numba_loop(dtype, shapes, reduce, sides):
    """Node scales applied inside the numba sum (GCN's normalisation) equal spmm(x * s) * d, forward and
    gradients; weighted per head, per element or not at all; constant (64) and run-time (5) widths;
    multi-edges, destinations without in-edges, no edges, one node; one-thread and parallel launches."""
    for case in ("multi", "no_edges", "one_node"):
        for threshold in (0, interop.PARALLEL_MIN_WORK):
            with (
                mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold),
                mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0),
            ):
                check_scaled_spmm(cpu_backend.scaled_spmm, case, shapes, reduce, sides, dtype)


@pytest.mark.parametrize("heads, feats", [(1, 64), (2, 64), (3, 65), (4, 8)])
@pytest.mark.parametrize("weighted", [False, True])
def test_head_spmm_rows_equals_torch_head_spmm(heads, feats, weighted):
    """The numba head sum called directly (as ``_SpmmHeads`` calls it, forward and transposed) equals the
    torch backend's, weighted per head or unweighted over every head, with the size floor lowered."""
    from gnnc.backend.pytorch.csr import head_spmm

    ns, nd, src, dst = edges("multi")
    by_src, by_dst = rand(ns, heads, feats).detach(), rand(nd, heads, feats).detach()
    w = rand(src.numel(), heads, seed=2).detach() if weighted else None
    with mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0):
        for x, rows, cols, n in ((by_src, dst, src, nd), (by_dst, src, dst, ns)):
            torch.testing.assert_close(
                cpu_spmm.head_spmm_rows(x, rows, cols, n, w), head_spmm(x, rows, cols, n, w), **TOL[torch.float64]
            )


@pytest.mark.parametrize("x_needs_grad", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_weighted_sum_gradients_take_one_pass_over_the_sources(reduce, x_needs_grad):
    """When the weights need a gradient, backward is one numba loop over the CSR by source giving both
    gradients (or the weights' alone): no sampled matmul or head-major copies; values as the naive sum's
    (MoNet's kernels as heads, a destination scale and a mean)."""
    torch_spmm = importlib.import_module("gnnc.backend.pytorch.spmm")
    ns, nd, src, dst = edges("multi")
    x = rand(ns, 3, 64).requires_grad_(x_needs_grad)
    w = rand(src.numel(), 3, 1, seed=2)
    scale = rand(nd, seed=3).detach().abs() + 0.5
    launched = []

    def counting(kernel, *args):
        launched.append(kernel)
        return interop.launch(kernel, *args)

    with (
        mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0),
        mock.patch.object(cpu_spmm, "launch", counting),
        mock.patch.object(torch_spmm, "head_sddmm", side_effect=AssertionError("the sampled matmul ran")),
    ):
        out = cpu_backend.scaled_spmm(x, src, dst, nd, None, scale, w, reduce)
        launched.clear()
        got = torch.autograd.grad(out, [t for t in (x, w) if t.requires_grad], torch.ones_like(out))
    assert launched == [cpu_spmm._gradient_rows(64, x_needs_grad, True)]
    want = naive_spmm(x, src, dst, nd, w, "mul", reduce) * scale.view(-1, 1, 1)
    expected = torch.autograd.grad(want, [t for t in (x, w) if t.requires_grad], torch.ones_like(want))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


@pytest.mark.parametrize("heads, feats", [(8, 8), (3, 4), (16, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_narrow_heads_sum_in_the_numba_loop(heads, feats, dtype):
    """Narrow heads (as GAT's and HGT's) take the numba loop too, per head or per block-diagonal matmul size:
    the per-head weighted SpMM and the dot SDDMM's backward (HGT's attention scores) equal the naive ones,
    forward and gradients, and the loop runs."""
    from gnnc.backend.pytorch import csr

    launched = []

    def counting(kernel, *args):
        launched.append(kernel)
        return interop.launch(kernel, *args)

    for blocks in (csr.MAX_BLOCK_ENTRIES, 0):  # torch's fallback there: one block-diagonal matmul, or per head
        with (
            mock.patch.object(csr, "MAX_BLOCK_ENTRIES", blocks),
            mock.patch.object(cpu_spmm, "NUMBA_SUM_MIN_ELEMENTS", 0),
            mock.patch.object(cpu_spmm, "launch", counting),
        ):
            _check_narrow_heads(heads, feats, dtype, launched)


def _check_narrow_heads(heads, feats, dtype, launched):
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        x, w = rand(ns, heads, feats, dtype=dtype), rand(src.numel(), heads, 1, dtype=dtype, seed=2)
        check_against(
            lambda x, w: cpu_backend.spmm(x, src, dst, nd, w, "mul", "sum"),
            lambda x, w: naive_spmm(x, src, dst, nd, w, "mul", "sum"),
            [x, w],
            dtype,
        )
        after_spmm = len(launched)
        a, b = rand(ns, heads, feats, dtype=dtype), rand(nd, heads, feats, dtype=dtype, seed=3)
        check_against(
            lambda a, b: cpu_backend.sddmm(a, src, b, dst, "dot"),
            lambda a, b: naive_binary("dot", a[src], b[dst]),
            [a, b],
            dtype,
        )
        if src.numel():  # forward, both gradients; then the SDDMM's two gradients
            assert after_spmm >= 3 and len(launched) - after_spmm >= 2, (case, launched)
        launched.clear()


def test_spmm_extremum_nan_has_no_arg_edge():
    src, dst = torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0])
    x = torch.tensor([[1.0], [float("nan")], [3.0]], requires_grad=True)
    for kernels in (cpu_backend, torch_backend):
        out = kernels.spmm(x, src, dst, 1, op="copy", reduce="max")
        assert torch.isnan(out).all()
        (grad,) = torch.autograd.grad(out.sum(), x)
        assert torch.equal(grad, torch.zeros_like(x))
    with pytest.raises(IndexError, match="src"):
        cpu_backend.spmm(x, torch.tensor([0, 5, 1]), dst, 1, op="copy", reduce="max")
