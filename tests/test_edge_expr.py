"""Edge expressions summed into destinations: the generated numba loops against the torch reference, and
the fuse rule that forms them, compiled against eager.

Backend: every supported operator, broadcasting over heads and kernels, a last-dim sum, source,
destination, edge and shared operands, sum and mean, float32 and float64, on index sets with zero
in-degree nodes, self loops, multi-edges and no edges; one thread and parallel launches (shared
gradients summed from per-thread copies); forward and the gradient of every operand. Compiled: MoNet's
GMMConv and UDFs of arithmetic on edges.src / edges.dst / edges.data run ``edge_expr_aggregate`` (the
recorded plans hold it) and equal eager, outputs and gradients.
"""

from __future__ import annotations

import warnings
from unittest import mock

import pytest
import torch

pytest.importorskip("numba")

import gnnc
from gnnc import models
from gnnc.backend import pytorch as torch_backend
from gnnc.backend.cpu import edge_expr as cpu_edge_expr
from gnnc.backend.cpu import interop
from gnnc.backend.cpu.edge_expr_codegen import EdgeProgram
from gnnc.backend.pytorch.edge_expr import check_edge_expr
from gnnc.backend.pytorch.edge_expr import shapes as step_shapes
from gnnc.compiler import driver as compiled
from gnnc.ir import operators as ops

from .graphs import random_homograph

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-9, atol=1e-11)}
K, F, D = 3, 5, 2

# MoNet's Gaussian weights times the source rows: exp(-0.5 * sum_d ((p - mu)^2 * s * s)) * z[src]
GMM = (
    ("operand", 0),
    ("unsqueeze", 0, 1),
    ("operand", 1),
    ("sub", 1, 2),
    ("pow", 3, 2.0),
    ("operand", 2),
    ("mul", 4, 5),
    ("mul", 6, 5),
    ("sum", 7, True),
    ("const", -0.5),
    ("mul", 8, 9),
    ("exp", 10),
    ("operand", 3),
    ("mul", 11, 12),
)
GMM_KINDS = ("edge", "shared", "shared", "src")
GMM_SHAPES = ((D,), (K, D), (K, D), (K, F))

# sigmoid(a[src] + b[dst]) * x[src] / (1 + w^2) - tanh(leaky_relu(x[dst], 0.2)) * neg(c): heads broadcast
MIXED = (
    ("operand", 0),
    ("operand", 1),
    ("add", 0, 1),
    ("sigmoid", 2),
    ("operand", 2),
    ("mul", 3, 4),
    ("operand", 3),
    ("pow", 6, 2.0),
    ("const", 1.0),
    ("add", 8, 7),
    ("div", 5, 9),
    ("operand", 4),
    ("leaky_relu", 11, 0.2),
    ("tanh", 12),
    ("operand", 5),
    ("neg", 14),
    ("mul", 13, 15),
    ("sub", 10, 16),
)
MIXED_KINDS = ("src", "dst", "src", "edge", "dst", "shared")
MIXED_SHAPES = ((K, 1), (K, 1), (K, F), (1, 1), (K, F), (F,))

# relu(sum over the last dim of x[src] * y[dst]) (a dot product per head) times an edge weight, squeezed
DOT = (
    ("operand", 0),
    ("operand", 1),
    ("mul", 0, 1),
    ("sum", 2, False),
    ("leaky_relu", 3, 0.0),
    ("operand", 2),
    ("squeeze", 5, 2),
    ("mul", 4, 6),
)
DOT_KINDS = ("src", "dst", "edge")
DOT_SHAPES = ((K, F), (K, F), (K, 1))

PROGRAMS = {
    "gmm": (GMM, GMM_KINDS, GMM_SHAPES),
    "mixed": (MIXED, MIXED_KINDS, MIXED_SHAPES),
    "dot": (DOT, DOT_KINDS, DOT_SHAPES),
}


def _edges(case: str, num_nodes: int, num_edges: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    if case == "no_edges":
        return torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), num_nodes
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes - 3, (num_edges,), generator=gen)  # the last 3 get no in-edges
    loops = torch.arange(3)
    return torch.cat([src, loops, src[:4]]), torch.cat([dst, loops, dst[:4]]), num_nodes


def _operands(kinds, shapes, num_nodes, num_edges, dtype, seed=1):
    gen = torch.Generator().manual_seed(seed)
    rows = {"src": num_nodes, "dst": num_nodes, "edge": num_edges}
    out = []
    for kind, shape in zip(kinds, shapes):
        full = shape if kind == "shared" else (rows[kind],) + shape
        out.append(torch.rand(full, generator=gen, dtype=dtype) + 0.25)
    return out


def _run(fn, program, kinds, operands, src, dst, n, reduce, grad_seed=2):
    leaves = [t.clone().requires_grad_() for t in operands]
    out = fn(program, kinds, tuple(leaves), src, dst, n, reduce)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=out.dtype)
    return [out.detach(), *torch.autograd.grad(out, leaves, grad)]


@pytest.mark.parametrize(
    "name, reduce, dtype",
    [
        ("gmm", "sum", torch.float32),
        ("gmm", "mean", torch.float64),
        ("mixed", "sum", torch.float64),
        ("mixed", "mean", torch.float32),
        ("dot", "mean", torch.float64),
    ],
)
@pytest.mark.parametrize("case", ["multi", "no_edges"])
@pytest.mark.parametrize("parallel", [False, True])
def test_generated_loops_match_the_torch_reference(name, reduce, dtype, case, parallel):
    program, kinds, shapes = PROGRAMS[name]
    src, dst, n = _edges(case, 23, 70, seed=len(case))
    operands = _operands(kinds, shapes, n, src.numel(), dtype)
    threshold = 0 if parallel else interop.PARALLEL_MIN_WORK
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold):
        got = _run(cpu_edge_expr.edge_expr_aggregate, program, kinds, operands, src, dst, n, reduce)
    want = _run(torch_backend.edge_expr.edge_expr_aggregate, program, kinds, operands, src, dst, n, reduce)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[dtype])


@pytest.mark.parametrize("parallel", [False, True])
def test_gradient_buffers_are_all_written_even_rows_no_edge_reaches(parallel):
    """The kernels zero the gradient rows they visit instead of a zero-filled buffer: under an allocator
    that hands out NaNs, every row (of operands with more rows than the loops visit too) equals the
    reference, and rows no edge reaches are 0."""
    src, dst, n = _edges("multi", 23, 70, seed=4)
    num_dst = n - 3  # no edge reaches the last 3 destinations; the dst operand has rows past num_dst
    rows = {"src": n, "dst": n, "edge": src.numel()}
    gen = torch.Generator().manual_seed(6)
    operands = [
        torch.rand((k if kind == "shared" else (rows[kind] + (5 if i == 0 else 0),) + k), generator=gen)
        .double()
        .add(0.25)
        for i, (kind, k) in enumerate(zip(MIXED_KINDS, MIXED_SHAPES))
    ]  # operand 0 (src) has 5 rows more than the other source operand: no edge reaches them
    real_empty = torch.empty

    def poisoned(*args, **kwargs):
        return real_empty(*args, **kwargs).fill_(float("nan"))

    threshold = 0 if parallel else interop.PARALLEL_MIN_WORK
    with mock.patch.object(interop, "PARALLEL_MIN_WORK", threshold), mock.patch("torch.empty", poisoned):
        got = _run(cpu_edge_expr.edge_expr_aggregate, MIXED, MIXED_KINDS, operands, src, dst, num_dst, "sum")
    want = _run(torch_backend.edge_expr.edge_expr_aggregate, MIXED, MIXED_KINDS, operands, src, dst, num_dst, "sum")
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])
    assert not got[1][n:].any() and not got[2][num_dst:].any()


def test_gradcheck():
    src, dst, n = _edges("multi", 9, 25, seed=3)
    for program, kinds, shapes in PROGRAMS.values():
        operands = [t.requires_grad_() for t in _operands(kinds, shapes, n, src.numel(), torch.float64)]
        torch.autograd.gradcheck(
            lambda *ts, p=program, k=kinds: cpu_edge_expr.edge_expr_aggregate(p, k, ts, src, dst, n, "mean"),
            operands,
        )


def test_only_the_gradients_asked_for_are_computed_and_nothing_of_edge_size_is_saved():
    src, dst, n = _edges("multi", 23, 70, seed=5)
    operands = _operands(GMM_KINDS, GMM_SHAPES, n, src.numel(), torch.float32)
    x = operands[3].requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = cpu_edge_expr.edge_expr_aggregate(GMM, GMM_KINDS, tuple(operands), src, dst, n, "sum")
    assert all(t.shape[0] != src.numel() or t.dim() == 1 for t in saved if t is not operands[0])
    (got,) = torch.autograd.grad(out.sum(), [x])
    ref = torch_backend.edge_expr.edge_expr_aggregate(GMM, GMM_KINDS, tuple(operands), src, dst, n, "sum")
    torch.testing.assert_close(got, torch.autograd.grad(ref.sum(), [x])[0], **TOL[torch.float32])


@pytest.mark.parametrize(
    "program, kinds, shapes, culprit",
    [
        (GMM, GMM_KINDS, GMM_SHAPES, "reduce"),
        ((("operand", 0), ("sum", 0, False)), ("edge",), ((),), "edge dim"),
        ((("operand", 0), ("operand", 1), ("add", 0, 1)), ("edge", "shared"), ((3,), (2, 3)), "broadcast"),
        ((("operand", 0),), ("node",), ((3,),), "kinds"),
    ],
)
def test_bad_programs_are_refused_naming_the_culprit(program, kinds, shapes, culprit):
    operands = _operands(
        [k if k in ("src", "dst", "edge", "shared") else "edge" for k in kinds], shapes, 5, 7, torch.float32
    )
    reduce = "max" if culprit == "reduce" else "sum"
    with pytest.raises(ValueError, match=culprit):
        check_edge_expr(program, kinds, operands, reduce)


# ------------------------------------------------------------------ compiled against eager
def _compiled(model, g, *inputs, backend="auto"):
    """The compiled model's output and gradients (inputs and parameters), and the targets of its plans."""
    cm = gnnc.compile(model, backend=backend)
    leaves = [t.clone().requires_grad_() for t in inputs]
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = cm(g, *leaves)
    assert plans, "no compiled plan ran"
    grads = torch.autograd.grad(out, leaves + list(model.parameters()), _upstream(out), allow_unused=True)
    return out.detach(), grads, {n.target for p in plans for n in p.dfg.graph.nodes}


def _eager(model, g, *inputs):
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = model(g, *leaves)
    return out.detach(), torch.autograd.grad(out, leaves + list(model.parameters()), _upstream(out), allow_unused=True)


def _upstream(out):
    return torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)


def _check(model, g, *inputs, dtype=torch.float64, backend="auto"):
    got, got_grads, targets = _compiled(model, g, *inputs, backend=backend)
    want, want_grads = _eager(model, g, *inputs)
    assert ops.edge_expr_aggregate in targets, targets
    torch.testing.assert_close(got, want, **TOL[dtype])
    for a, b in zip(got_grads, want_grads):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, **TOL[dtype])
    return targets


@pytest.mark.parametrize("aggregator", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_gmm_runs_its_gaussian_weights_inside_the_aggregation(aggregator, dtype, backend):
    torch.manual_seed(0)
    g = random_homograph(40, 200, 3)
    model = models.GMMConv(8, 5, 2, 3, aggregator=aggregator).to(dtype)
    x, p = torch.randn(40, 8, dtype=dtype), torch.rand(g.num_edges(), 2, dtype=dtype)
    targets = _check(model, g, x, p, dtype=dtype, backend=backend)
    assert ops.spmm not in targets and ops.gather_src not in targets, targets


def test_gmm_on_a_graph_without_edges():
    g = gnnc.graph((torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)), num_nodes=6)
    model = models.GMMConv(4, 3, 2, 2).double()
    _check(model, g, torch.randn(6, 4, dtype=torch.float64), torch.rand(0, 2, dtype=torch.float64))


class _Udf(torch.nn.Module):
    def __init__(self, message, reduce="sum"):
        super().__init__()
        self.message, self.reduce = message, reduce
        self.scale = torch.nn.Parameter(torch.rand(3, 1, dtype=torch.float64) + 0.5)

    def forward(self, g, h, a, w):
        with g.local_scope():
            g.ndata["h"], g.ndata["a"], g.edata["w"] = h, a, w
            g.update_all(lambda e: {"m": self.message(self, e)}, getattr(gnnc.function, self.reduce)("m", "o"))
            return g.ndata["o"]


MESSAGES = {
    "gated": lambda m, e: torch.sigmoid(e.src["a"] + e.dst["a"]) * e.src["h"] * m.scale,
    "edge_data": lambda m, e: (e.data["w"] ** 2 - e.src["h"]) * torch.tanh(e.dst["h"]),
    "attention_free": lambda m, e: torch.exp(-((e.src["h"] - e.dst["h"]) ** 2).sum(-1, keepdim=True)) * e.src["h"],
    "leaky": lambda m, e: torch.nn.functional.leaky_relu(e.src["h"] / (1 + e.data["w"]), 0.1) - e.dst["h"],
}


@pytest.mark.parametrize("name", list(MESSAGES))
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_udf_arithmetic_on_edges_runs_as_one_generated_loop(name, reduce):
    torch.manual_seed(1)
    g = random_homograph(30, 120, 4)
    h = torch.randn(30, 3, 4, dtype=torch.float64)
    a = torch.randn(30, 3, 1, dtype=torch.float64)
    w = torch.rand(g.num_edges(), 3, 1, dtype=torch.float64)
    _check(_Udf(MESSAGES[name], reduce), g, h, a, w)


def test_a_value_read_outside_the_expression_stays_an_operand():
    """The weight is also written to the edges: it is computed once, and the expression reads it."""

    class Both(torch.nn.Module):
        def forward(self, g, h, w):
            with g.local_scope():
                g.ndata["h"], g.edata["w"] = h, w
                g.apply_edges(lambda e: {"k": torch.exp(-e.data["w"])})
                g.update_all(lambda e: {"m": torch.sigmoid(e.data["k"]) * e.src["h"] + 1}, gnnc.function.sum("m", "o"))
                return g.ndata["o"] + g.edata["k"].sum()

    g = random_homograph(20, 60, 2)
    _check(Both(), g, torch.randn(20, 4, dtype=torch.float64), torch.rand(g.num_edges(), 1, dtype=torch.float64))


def test_exp_and_sigmoid_are_the_vectorizable_exp_in_both_directions():
    """libm's exp, a call per element, kept LLVM from vectorizing the loops (half their speed)."""
    program = (("operand", 0), ("operand", 1), ("add", 0, 1), ("sigmoid", 2), ("exp", 2), ("mul", 3, 4))
    kinds = ("src", "dst")
    plan = EdgeProgram(program, kinds, step_shapes(program, kinds, [(5, 4), (5, 4)]), "float32")
    sources = [plan.forward_source("f", False), plan.backward_source("b", frozenset({0}), True)]
    for source in sources:
        assert source.count("vexp(") == 2 and "np.exp" not in source, source


def test_a_reshaped_edge_weight_times_source_rows_stays_the_static_spmm():
    """No arithmetic in the weight: the hand-written spmm kernel is as good, and needs no generated kernel."""
    model = _Udf(lambda m, e: e.src["h"] * e.data["w"].squeeze(-1).unsqueeze(-1))
    g = random_homograph(30, 120, 5)
    h, a = torch.randn(30, 3, 4, dtype=torch.float64), torch.randn(30, 3, 1, dtype=torch.float64)
    w = torch.rand(g.num_edges(), 3, 1, dtype=torch.float64)
    got, got_grads, targets = _compiled(model, g, h, a, w)
    assert ops.spmm in targets and ops.edge_expr_aggregate not in targets, targets
    want, want_grads = _eager(model, g, h, a, w)
    torch.testing.assert_close(got, want)
    for x, y in zip(got_grads, want_grads):
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_overflow_to_inf_and_nan_lands_where_eager_puts_it(dtype):
    """Edge weights that underflowed to zero (a saturated sigmoid) and large rows: h / w overflows. The
    generated loops round and overflow each step as torch does (no fast math, torch's order for the
    quotient's gradient), so inf and nan land where eager's land, forward and backward."""
    torch.manual_seed(3)
    g = random_homograph(16, 60, 6)
    h = torch.randn(16, 3, dtype=dtype) * 30
    w = torch.sigmoid(torch.randn(g.num_edges(), 3, dtype=dtype) * 60) * 1.5
    w[::7], w[3::7] = torch.finfo(dtype).tiny, 0.0
    model = _Udf(lambda m, e: e.src["h"] / e.data["w"], reduce="mean")
    got, got_grads, targets = _compiled(model, g, h, h, w)
    want, want_grads = _eager(model, g, h, h, w)
    assert ops.edge_expr_aggregate in targets, targets
    assert not torch.isfinite(want_grads[2]).all(), "the case must overflow in eager"
    torch.testing.assert_close(got, want, equal_nan=True, **TOL[dtype])
    for a, b in zip(got_grads, want_grads):
        if a is not None:
            torch.testing.assert_close(a, b, equal_nan=True, **TOL[dtype])


def test_a_generated_kernels_file_is_named_by_its_compile_options_too():
    """numba's cache index keys on a kernel's file and signature, not its flags: the same source compiled
    with other flags must live in another file, or a build cached with the old flags is loaded."""
    from gnnc.backend.cpu import codegen

    source = "def twice(bounds, x):\n    for i in range(bounds[0], bounds[-1]):\n        x[i] *= 2\n"
    exact, fast = (codegen.generated_kernel("twice", source, flags) for flags in (set(), {"reassoc"}))
    assert exact.py_func.__code__.co_filename != fast.py_func.__code__.co_filename
