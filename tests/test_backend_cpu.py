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

from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

import gnnc  # noqa: E402
from gnnc import backend  # noqa: E402
from gnnc.backend import cpu as cpu_backend  # noqa: E402
from gnnc.backend import torch as torch_backend  # noqa: E402
from gnnc.backend.cpu import interop  # noqa: E402
from gnnc.models.gat import GATConv  # noqa: E402

from .graphs import random_homograph  # noqa: E402
from .test_backend_torch import SDDMM_SHAPES, check_against, edges, naive_binary, naive_spmm, rand  # noqa: E402

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
    logits = logits.detach().requires_grad_()
    x = x.detach().requires_grad_()
    out = kernels.edge_softmax_aggregate(logits, x, src, dst, num_dst)
    gl, gx = torch.autograd.grad(out, (logits, x), grad, allow_unused=True)
    return out, gl, gx


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", ["multi", "no_edges", "one_node", "large_logits"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
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


@pytest.mark.parametrize("width", [1, 3, 8, 24])
def test_constant_and_runtime_widths(width):
    """Widths in SPECIALIZED_WIDTHS compile as constants (1, 8), others (3, 24) read theirs at run time."""
    src, dst, n = _edges("multi", 40, 300, seed=width)
    gen = torch.Generator().manual_seed(width)
    logits = torch.randn(src.numel(), 2, generator=gen, dtype=torch.float64) * 5
    x = torch.randn(n, 2, width, generator=gen, dtype=torch.float64)
    grad = torch.randn(n, 2, width, generator=gen, dtype=torch.float64)
    for threshold in (0, interop.PARALLEL_MIN_WORK):
        with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
            got = _run(cpu_backend, logits, x, src, dst, n, grad)
        for g, w in zip(got, _run(torch_backend, logits, x, src, dst, n, grad)):
            torch.testing.assert_close(g, w, **TOL[torch.float64])


def test_gradcheck():
    src, dst, n = _edges("multi", 9, 25, seed=3)
    logits = torch.randn(src.numel(), 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(n, 2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda l, v: cpu_backend.edge_softmax_aggregate(l, v, src, dst, n), (logits, x))


@settings(max_examples=25, deadline=None)
@given(num_nodes=st.integers(1, 30), num_edges=st.integers(0, 80), heads=st.integers(1, 4),
       feats=st.integers(1, 6), seed=st.integers(0, 1000))
def test_random_graphs(num_nodes, num_edges, heads, feats, seed):
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
        cpu_backend.edge_softmax_aggregate(torch.randn(2, 1), torch.randn(3, 1, 2, dtype=torch.float64),
                                           torch.tensor([0, 1]), torch.tensor([0, 1]), 3)


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


def test_explain_names_the_backend():
    g = random_homograph(10, 30, seed=1)
    text = gnnc.explain(GATConv(3, 2, 2).eval(), g, torch.randn(10, 3))
    assert "[backend cpu]" in text
    assert "[backend torch]" in gnnc.explain(GATConv(3, 2, 2).eval(), g, torch.randn(10, 3), backend="torch")


def test_concurrent_calls_from_threads():
    """numba's workqueue pool aborts the process on concurrent launches; launches take a lock,
    so calls from several threads take turns."""
    from concurrent.futures import ThreadPoolExecutor

    src, dst, n = _edges("multi", 200, 3000, seed=9)
    logits = torch.randn(src.numel(), 4, dtype=torch.float64)
    x = torch.randn(n, 4, 8, dtype=torch.float64)
    want = torch_backend.edge_softmax_aggregate(logits, x, src, dst, n)
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", 0), ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: cpu_backend.edge_softmax_aggregate(logits, x, src, dst, n), range(16)))
    for got in results:
        torch.testing.assert_close(got, want, **TOL[torch.float64])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shapes", list(SDDMM_SHAPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
def test_sddmm_matches_naive(op, shapes, dtype):
    """Same feature shapes run the numba edge loop; broadcast shapes and dot run on the torch backend."""
    af, bf = SDDMM_SHAPES[shapes]
    if op == "dot" and not af and not bf:
        with pytest.raises(ValueError, match="dot"):
            cpu_backend.sddmm(torch.ones(2, dtype=dtype), torch.tensor([0]), torch.ones(2, dtype=dtype),
                              torch.tensor([1]), op)
        return
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        a, b = rand(ns, *af, dtype=dtype), rand(nd, *bf, dtype=dtype, positive=op == "div", seed=2)
        for threshold in (0, interop.PARALLEL_MIN_WORK):
            with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
                check_against(lambda a, b: cpu_backend.sddmm(a, src, b, dst, op),
                              lambda a, b: naive_binary(op, a[src], b[dst]), [a, b], dtype)


@pytest.mark.parametrize("width", [8, 3])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_sddmm_leaky_relu_epilogue(op, width):
    """The activation inside the numba edge loop; its backward (the torch backend's) recomputes the sign."""
    for dtype in (torch.float32, torch.float64):
        ns, nd, src, dst = edges("multi")
        a, b = rand(ns, 2, width, dtype=dtype), rand(nd, 2, width, dtype=dtype, seed=2)
        for slope in (0.2, 0.0):
            check_against(lambda a, b: cpu_backend.sddmm(a, src, b, dst, op, negative_slope=slope),
                          lambda a, b: torch.nn.functional.leaky_relu(naive_binary(op, a[src], b[dst]), slope),
                          [a, b], dtype)


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
    often), zero without in-edges, gradients to the arg edge; weighted or summed spmm runs on torch."""
    for case in ("multi", "no_edges", "one_node"):
        ns, nd, src, dst = edges(case)
        for ties in (False, True):
            x = rand(ns, *feat, dtype=dtype, ties=ties)
            for threshold in (0, interop.PARALLEL_MIN_WORK):
                with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
                    check_against(lambda x: cpu_backend.spmm(x, src, dst, nd, op="copy", reduce=reduce),
                                  lambda x: naive_spmm(x, src, dst, nd, None, "copy", reduce), [x], dtype)
    ns, nd, src, dst = edges("multi")
    w = rand(src.numel(), *feat, dtype=dtype, seed=3)
    x = rand(ns, *feat, dtype=dtype)
    check_against(lambda x, w: cpu_backend.spmm(x, src, dst, nd, w, "mul", reduce),
                  lambda x, w: naive_spmm(x, src, dst, nd, w, "mul", reduce), [x, w], dtype)


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
