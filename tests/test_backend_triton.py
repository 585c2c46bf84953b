"""gnnc.backend.triton (Triton kernels) against the torch reference backend, on every CI run.

Without a GPU the kernels run in Triton's interpreter on CPU tensors. Triton
reads ``TRITON_INTERPRET`` once, when it is first imported, so this module
sets it before importing triton when nothing has imported triton yet (CPU
machines only: with CUDA the compiled kernels are tested on the GPU). If
triton was already imported in compiled mode on a machine without a GPU,
every test here skips except ``test_in_interpreter_subprocess``, which runs
this file again in a fresh interpreter-mode process.

Every kernel's forward and gradients equal the torch backend's on small
index sets with zero in-degree nodes, self loops, multi-edges, unsorted
destinations, no edges and one node (``test_backend_torch.edges``), in
float32 and float64, the sums and means also with each of their
vertex- and edge-balanced kernels forced and on a hub graph; every
reference layer compiled on the triton backend equals eager, outputs and
gradients. Graphs are tiny:
the interpreter runs each program as numpy operations.
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
from torch import nn

_CUDA = torch.cuda.is_available()
if "triton" not in sys.modules and not _CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton's first import (see the module docstring)
pytest.importorskip("triton")

import gnnc  # noqa: E402 - triton reads TRITON_INTERPRET (set above) when first imported
from gnnc import backend  # noqa: E402
from gnnc.backend import pytorch as torch_backend  # noqa: E402
from gnnc.backend import triton as triton_backend  # noqa: E402
from gnnc.backend.pytorch.csr import csr_structure  # noqa: E402
from gnnc.backend.triton import balance, launch  # noqa: E402
from gnnc.models import (  # noqa: E402
    EdgeConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINConv,
    GMMConv,
    HGTConv,
    RGATConv,
    RGCNConv,
    SAGEConv,
    SimpleHGNConv,
)

from .graphs import random_heterograph, random_homograph  # noqa: E402
from .test_backend_torch import SDDMM_SHAPES, edges, rand  # noqa: E402

DEVICE = torch.device("cuda" if _CUDA and not launch.INTERPRETED else "cpu")
RUNNABLE = launch.INTERPRETED or DEVICE.type == "cuda"
# numpy warns of the inf - inf and exp overflows in masked-off lanes, whose values the kernels discard
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
needs_kernels = pytest.mark.skipif(
    not RUNNABLE,
    reason="triton was imported in compiled mode without a GPU; "
    "test_in_interpreter_subprocess runs this file in interpreter mode",
)

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-9, atol=1e-10)}
DTYPES = (torch.float32, torch.float64)
CASES = ("multi", "no_edges", "one_node")


def on_device(case: str, **sizes):
    num_src, num_dst, src, dst = edges(case, **sizes)
    return num_src, num_dst, src.to(DEVICE), dst.to(DEVICE)


def hub_graph(num_nodes: int = 40, hub_edges: int = 100, other_edges: int = 30):
    """(num_src, num_dst, src, dst): destination 3 receives ``hub_edges`` of the edges, from sources drawn
    at random (repeats: multi-edges), the rest go to random destinations among the first half (the second
    half has no in-edges); unsorted."""
    gen = torch.Generator().manual_seed(3)
    dst = torch.cat([torch.full((hub_edges,), 3), torch.randint(0, num_nodes // 2, (other_edges,), generator=gen)])
    dst = dst[torch.randperm(dst.numel(), generator=gen)]
    src = torch.randint(0, num_nodes, (dst.numel(),), generator=gen)
    return num_nodes, num_nodes, src.to(DEVICE), dst.to(DEVICE)


def tensor(*shape, dtype=torch.float64, seed=0, **kw):
    return rand(*shape, dtype=dtype, seed=seed, **kw).detach().to(DEVICE)


def with_grads(fn, inputs, grad, needed=None):
    """(fn(*inputs), gradient of each input that ``needed`` marks (all by default)) for the upstream ``grad``."""
    needed = needed or [True] * len(inputs)
    inputs = [t.detach().requires_grad_(n) for t, n in zip(inputs, needed)]
    out = fn(*inputs)
    return (out, *torch.autograd.grad(out, [t for t in inputs if t.requires_grad], grad, allow_unused=True))


def same_as_torch(primitive, inputs, dtype, large=False, needed=None, terms=1):
    """``primitive(kernels)`` (a function of ``inputs``) on the triton backend equals it on torch, forward and
    backward (the gradients ``needed`` marks, all by default).

    ``large`` (logits in the hundreds): float32 gradients are compared with an absolute tolerance of 1e-5
    times their largest entry: where one edge dominates a softmax, its logit gradient is a difference of
    nearly equal terms that the backends round differently, and SDDMM operands multiply that rounding.
    ``terms``: the most terms one entry sums; in float32 the absolute tolerance grows to terms x 2^-24 x the
    largest entry, the rounding of a sum whose order atomic adds leave free (on a GPU, a hub row of 100
    edges summed by the edge-balanced kernel differed from torch's by 7e-6).
    """
    want_out = primitive(torch_backend)(*inputs)
    grad = torch.randn(want_out.shape, generator=torch.Generator().manual_seed(7), dtype=dtype).to(DEVICE)
    got = with_grads(primitive(triton_backend), inputs, grad, needed)
    want = with_grads(primitive(torch_backend), inputs, grad, needed)
    for g, w in zip(got, want):
        tol = dict(TOL[dtype])
        if large and w.numel():
            tol["atol"] = max(tol["atol"], tol["rtol"]) * max(1.0, w.abs().max().item())
        if dtype == torch.float32 and terms > 1 and w.numel():
            tol["atol"] = max(tol["atol"], terms * 2**-24 * w.abs().max().item())
        torch.testing.assert_close(g, w, **tol)


# ---- spmm and segment reductions ---------------------------------------------------------------------------

SPMM_SHAPES = [((3, 4), (3, 1)), ((4,), (3, 4)), ((), ())]  # (x features, edge weight features)


@needs_kernels
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm_and_segment_reduce_match_torch(reduce, case):
    """Every spmm op (copy and the weighted ones) with head-broadcast, vector-broadcast and scalar features;
    segment_reduce with and without features (integer values in float64: ties)."""
    num_src, num_dst, src, dst = on_device(case)
    for dtype in DTYPES:
        for feat in ((2, 3), ()):
            values = tensor(dst.numel(), *feat, dtype=dtype, ties=dtype == torch.float64)
            same_as_torch(lambda k: lambda v: k.segment_reduce(v, dst, num_dst, reduce), [values], dtype)
        for x_feat, w_feat in SPMM_SHAPES:
            x = tensor(num_src, *x_feat, dtype=dtype)
            same_as_torch(lambda k: lambda x: k.spmm(x, src, dst, num_dst, op="copy", reduce=reduce), [x], dtype)
            w = tensor(src.numel(), *w_feat, dtype=dtype, seed=2, positive=True)
            for op in ("add", "sub", "mul", "div"):
                same_as_torch(lambda k: lambda x, w: k.spmm(x, src, dst, num_dst, w, op, reduce), [x, w], dtype)


@needs_kernels
@pytest.mark.parametrize("variant, case", [("edge", c) for c in CASES + ("hub",)] + [("vertex", "hub")])
def test_balanced_sums_match_torch(variant, case, monkeypatch):
    """Sum / mean spmm and segment_reduce with each kernel forced (the small graphs of ``CASES`` run
    vertex-balanced by the rule, so the test above covers that variant there). SPAN 4: rows span several
    lanes and programs, whose atomic adds meet in one row."""
    monkeypatch.setattr(balance, "BALANCE", variant)
    monkeypatch.setattr(balance, "SPAN", 4)
    num_src, num_dst, src, dst = hub_graph() if case == "hub" else on_device(case)
    (x_feat, w_feat), ops = SPMM_SHAPES[0], ("add", "sub", "mul", "div")
    terms = int(max(torch.bincount(dst).max(), torch.bincount(src).max())) if src.numel() else 1
    for dtype in DTYPES:
        x = tensor(num_src, *x_feat, dtype=dtype)
        w = tensor(src.numel(), *w_feat, dtype=dtype, seed=2, positive=True)
        same = functools.partial(same_as_torch, dtype=dtype, terms=terms)
        for reduce in ("sum", "mean"):
            values = tensor(dst.numel(), 2, 3, dtype=dtype)
            same(lambda k: lambda v: k.segment_reduce(v, dst, num_dst, reduce), [values])
            same(lambda k: lambda x: k.spmm(x, src, dst, num_dst, op="copy", reduce=reduce), [x])
            for op in ops if dtype == torch.float64 else ("mul",):
                same(lambda k: lambda x, w: k.spmm(x, src, dst, num_dst, w, op, reduce), [x, w])


def test_balance_rule():
    """Edge-balanced where one destination has most edges, vertex-balanced on uniform degrees, with the
    programs of the interpreter (1) and of a GPU (132 multiprocessors): a moderate hub pads little, so
    only its straggling program (the GPU's case) calls for edges. Forcing wins; no edges: vertex."""

    def structure(dst, num_rows):
        return csr_structure(torch.as_tensor(dst), num_rows)

    uniform = structure(torch.arange(1024).repeat_interleave(4), 1024)
    hub = structure(hub_graph()[3].cpu(), 40)
    moderate = structure(torch.cat([torch.zeros(100, dtype=torch.long), torch.arange(1024).repeat_interleave(4)]), 1024)
    gpu = 132 * balance.PROGRAMS_PER_SM
    for programs in (1, gpu):
        assert not balance.edge_balanced(uniform, 16, programs)
        assert balance.edge_balanced(hub, 16, programs)
    assert not balance.edge_balanced(moderate, 16, 1)
    assert balance.edge_balanced(moderate, 16, gpu)
    assert balance.padded_work(uniform, 16) == 4096  # no padding
    assert balance.padded_work(structure([0, 0, 0, 1, 17], 20), 16) == 16 * 3 + 16 * 1  # two blocks
    with mock.patch.object(balance, "BALANCE", "edge"):
        assert balance.edge_balanced(uniform, 16, 1)
        assert not balance.edge_balanced(structure(torch.zeros(0, dtype=torch.long), 3), 16, 1)
    with mock.patch.object(balance, "BALANCE", "vertex"):
        assert not balance.edge_balanced(hub, 16, gpu)


@needs_kernels
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_spmm_extremum_ties_and_nan(reduce):
    """Ties (integer values) send the gradient to the smallest edge id; a NaN extremum has no arg edge."""
    num_src, num_dst, src, dst = on_device("multi")
    x = tensor(num_src, 2, 3, ties=True)
    same_as_torch(lambda k: lambda x: k.spmm(x, src, dst, num_dst, op="copy", reduce=reduce), [x], torch.float64)
    x = torch.tensor([[1.0], [float("nan")], [3.0]], device=DEVICE, requires_grad=True)
    three = torch.tensor([0, 1, 2], device=DEVICE)
    out = triton_backend.spmm(x, three, torch.zeros_like(three), 1, op="copy", reduce=reduce)
    assert torch.isnan(out).all()
    assert torch.equal(torch.autograd.grad(out.sum(), x)[0], torch.zeros_like(x))


# ---- sddmm -------------------------------------------------------------------------------------------------


@needs_kernels
@pytest.mark.parametrize("shapes", list(SDDMM_SHAPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
def test_sddmm_matches_torch(op, shapes):
    """Right-aligned broadcasting of a and b, each binary op with and without the leaky_relu epilogue."""
    a_feat, b_feat = SDDMM_SHAPES[shapes]
    if op == "dot" and not a_feat and not b_feat:
        pytest.skip("dot needs a feature dim")
    slopes = (None,) if op == "dot" else (None, 0.0, 0.2)
    for case in CASES:
        num_src, num_dst, src, dst = on_device(case)
        for dtype in DTYPES:
            a = tensor(num_src, *a_feat, dtype=dtype)
            b = tensor(num_dst, *b_feat, dtype=dtype, seed=2, positive=op == "div")
            for slope in slopes:
                same_as_torch(lambda k: lambda a, b: k.sddmm(a, src, b, dst, op, negative_slope=slope), [a, b], dtype)


# ---- edge softmax, fused softmax aggregation ---------------------------------------------------------------

SOFTMAX_CASES = CASES + ("large_logits",)


def softmax_graph(case: str):
    """(num_src, num_dst, src, dst, logit scale): "large_logits" is the "multi" graph with logits ~1e3."""
    num_src, num_dst, src, dst = on_device("multi" if case == "large_logits" else case)
    return num_src, num_dst, src, dst, (1e3 if case == "large_logits" else 1.0)


@needs_kernels
@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_edge_softmax_matches_torch(case):
    _, num_dst, src, dst, scale = softmax_graph(case)
    for dtype in DTYPES:
        for feat in ((2, 3), ()):
            logits = tensor(src.numel(), *feat, dtype=dtype) * scale
            same_as_torch(lambda k: lambda logit: k.edge_softmax(logit, dst, num_dst), [logits], dtype, large=scale > 1)


# (logits features, x features): heads, one logit per edge, broadcast heads, one head for all, per feature
SOFTMAX_LAYOUTS = [((3,), (3, 4)), ((), (5,)), ((2, 1), (5,)), ((1,), (3, 4)), ((2, 3), (2, 3))]


@needs_kernels
@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_edge_softmax_aggregate_matches_torch(case):
    num_src, num_dst, src, dst, scale = softmax_graph(case)
    for dtype in DTYPES:
        for logit_feat, x_feat in SOFTMAX_LAYOUTS:
            logits = tensor(src.numel(), *logit_feat, dtype=dtype) * scale
            x = tensor(num_src, *x_feat, dtype=dtype, seed=1)
            same_as_torch(
                lambda k: lambda logit, x: k.edge_softmax_aggregate(logit, x, src, dst, num_dst),
                [logits, x],
                dtype,
                large=scale > 1,
            )


# (a, b, x features): GAT's heads run fused; different a and b shapes, the composition
SSA_LAYOUTS = [((3,), (3,), (3, 4)), ((3, 1), (3, 1), (3, 4)), ((), (), (5,)), ((3, 1), (1, 4), (3, 4))]


def ssa_check(op, layout, slope, dtype, case, needed=None):
    num_src, num_dst, src, dst, scale = softmax_graph(case)
    a_feat, b_feat, x_feat = layout
    a = tensor(num_src, *a_feat, dtype=dtype) * (60.0 if scale > 1 else 1.0)  # logits ~50-100 (mul: ~60 * b)
    b = tensor(num_dst, *b_feat, dtype=dtype, seed=2, positive=op == "div")
    x = tensor(num_src, *x_feat, dtype=dtype, seed=3)
    same_as_torch(
        lambda k: lambda a, b, x: k.sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, op, negative_slope=slope),
        [a, b, x],
        dtype,
        large=scale > 1,
        needed=needed,
    )


@needs_kernels
@pytest.mark.parametrize("case", SOFTMAX_CASES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_sddmm_softmax_aggregate_matches_torch(op, case):
    """Every op and epilogue (none, relu, leaky_relu) in both dtypes on GAT's layout; the other layouts
    in float64."""
    for dtype in DTYPES:
        for slope in (None, 0.0, 0.2):
            ssa_check(op, SSA_LAYOUTS[0], slope, dtype, case)
    for layout in SSA_LAYOUTS[1:]:
        ssa_check(op, layout, 0.2, torch.float64, case)


@needs_kernels
@pytest.mark.parametrize("needed", [(True, False, False), (False, True, False), (False, False, True)])
def test_softmax_aggregate_partial_grads(needed):
    """Only the requested gradients are computed (each kernel pass alone), each still right."""
    ssa_check("mul", SSA_LAYOUTS[0], 0.2, torch.float64, "multi", list(needed))
    num_src, num_dst, src, dst = on_device("multi")
    inputs = [tensor(src.numel(), 3), tensor(num_src, 3, 4, seed=1)]
    for which in ((True, False), (False, True)):
        same_as_torch(
            lambda k: lambda logit, x: k.edge_softmax_aggregate(logit, x, src, dst, num_dst),
            inputs,
            torch.float64,
            needed=list(which),
        )


@needs_kernels
def test_fused_softmax_aggregate_saves_no_edge_tensor_and_gradchecks():
    """Backward keeps O(V) statistics besides the inputs, no [E, ...] float tensor; gradcheck in float64."""
    num_src, num_dst, src, dst = on_device("multi", num_src=6, num_dst=6, num_edges=14)
    a, b, x = tensor(num_src, 2), tensor(num_dst, 2, seed=1), tensor(num_src, 2, 3, seed=2)
    out = triton_backend.sddmm_softmax_aggregate(
        *(t.requires_grad_() for t in (a, b, x)), src, dst, num_dst, negative_slope=0.2
    )
    assert not [
        t for t in out.grad_fn.saved_tensors if t is not None and t.is_floating_point() and t.shape[0] == src.numel()
    ]
    assert torch.autograd.gradcheck(
        lambda a, b, x: triton_backend.sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, "mul", negative_slope=0.2),
        (a, b, x),
        fast_mode=True,
    )


@needs_kernels
def test_sums_keep_x_only_for_the_weights_gradient():
    """A sum keeps x for backward only when its weight needs a gradient (max / min always, for the arg edge);
    the gradients are the torch backend's either way."""
    num_src, num_dst, src, dst = on_device("multi")
    x, w = tensor(num_src, 3, 4), tensor(src.numel(), 3, 1, seed=1)

    def keeps_x(out):
        return any(t is not None and t.data_ptr() == x.data_ptr() for t in out.grad_fn.saved_tensors)

    x.requires_grad_()
    assert not keeps_x(triton_backend.spmm(x, src, dst, num_dst, w, "mul", "sum"))
    assert not keeps_x(triton_backend.spmm(x, src, dst, num_dst, None, "copy", "mean"))
    assert keeps_x(triton_backend.spmm(x, src, dst, num_dst, w.requires_grad_(), "mul", "sum"))
    assert keeps_x(triton_backend.spmm(x, src, dst, num_dst, None, "copy", "max"))
    for reduce in ("sum", "max"):
        same_as_torch(
            lambda k: lambda x, w: k.spmm(x, src, dst, num_dst, w, "mul", reduce),
            [x, w],
            torch.float64,
            needed=[True, False],
        )


# ---- dense primitives -------------------------------------------------------------------------------------


@needs_kernels
@pytest.mark.parametrize("rows, heads, feats, k", [(37, 8, 8, 2), (5, 3, 70, 1), (0, 2, 3, 2)])
def test_head_dot_matches_torch(rows, heads, feats, k):
    """GAT's shape, features in several chunks, no rows."""
    for dtype in DTYPES:
        x, w = tensor(rows, heads, feats, dtype=dtype), tensor(k, heads, feats, dtype=dtype, seed=1)
        same_as_torch(lambda kernels: kernels.head_dot, [x, w], dtype)


# ---- selection, device rule, models ------------------------------------------------------------------------


@needs_kernels
def test_no_kernel_is_given_a_python_float(monkeypatch):
    """Triton passes a Python float as float32, rounding a float64 kernel's constant (an H200 showed
    leaky_relu's slope of 0.2 off by 1.5e-8 of itself in float64, which the interpreter, computing in
    numpy's float64, cannot show): every launch gets its constants as tensors of the data's dtype."""
    floats = []
    kernel_type = type(importlib.import_module("gnnc.backend.triton.sddmm").EDGES)  # the module, not the function
    run = kernel_type.run

    def recording_run(self, *args, **kwargs):
        floats.extend(f"{self.fn.__name__} argument {i}" for i, a in enumerate(args) if isinstance(a, float))
        return run(self, *args, **kwargs)

    monkeypatch.setattr(kernel_type, "run", recording_run)
    num_src, num_dst, src, dst = on_device("multi")
    a, b, x = tensor(num_src, 3), tensor(num_dst, 3, seed=2), tensor(num_src, 3, 4, seed=3)
    for primitive in (
        lambda k: lambda a, b: k.sddmm(a, src, b, dst, "add", negative_slope=0.2),
        lambda k: lambda a, b, x: k.sddmm_softmax_aggregate(a, b, x, src, dst, num_dst, "add", negative_slope=0.2),
    ):
        inputs = [a, b, x][: primitive(triton_backend).__code__.co_argcount]
        same_as_torch(primitive, inputs, torch.float64)
    assert not floats, floats


def test_resolve_and_device_rule():
    """``triton`` is a backend choice; ``auto`` picks it for CUDA tensors; CPU tensors run only under the
    interpreter, and each way to get that wrong is an error saying what to set."""
    assert "triton" in backend.CHOICES
    with mock.patch.object(backend, "triton_available", return_value=False):
        with pytest.raises(ImportError, match="gpu"):
            backend.resolve("triton", "cpu")
        assert backend.resolve("auto", "cuda") == "torch"
    assert backend.resolve("auto", "cuda") == "triton"
    assert backend.resolve("auto", "cpu") in ("cpu", "torch")
    with mock.patch.object(launch, "INTERPRETED", False), mock.patch.dict(os.environ, {"TRITON_INTERPRET": "0"}):
        with pytest.raises(RuntimeError, match="only under Triton's interpreter"):
            backend.resolve("triton", "cpu")
        with pytest.raises(RuntimeError, match="only under Triton's interpreter"):
            triton_backend.spmm(torch.ones(2, 1), torch.tensor([0]), torch.tensor([1]), 2)
        with (
            mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}),
            pytest.raises(RuntimeError, match="set after triton was imported"),
        ):
            backend.resolve("triton", "cuda")
    with mock.patch.object(launch, "INTERPRETED", True), mock.patch.dict(os.environ, {"TRITON_INTERPRET": "0"}):
        with pytest.raises(RuntimeError, match="leave it set"):
            backend.resolve("triton", "cpu")
    if launch.INTERPRETED:
        assert backend.resolve("triton", "cpu") == "triton"
    for name in ("segment_matmul", "gather_segment_matmul", "typed_index_matmul", "clear_structure_cache"):
        assert getattr(triton_backend, name) is getattr(torch_backend, name)  # delegated (see the module docstring)


class WithPseudo(nn.Module):
    """MoNet with fixed random pseudo-coordinates per edge, called as ``layer(g, x)``."""

    def __init__(self, g):
        super().__init__()
        self.layer = GMMConv(6, 5, 2, 3, aggregator="mean")
        self.register_buffer("pseudo", torch.rand(g.num_edges(), 2, generator=torch.Generator().manual_seed(1)))

    def forward(self, g, x):
        return self.layer(g, x, self.pseudo)


def _homograph():
    return random_homograph(30, 120, seed=5)


def _rels(g):
    return len(g.canonical_etypes)


MODELS = {
    "gcn": (_homograph, lambda g: GCNConv(6, 5)),
    "gat": (_homograph, lambda g: GATConv(6, 4, 3)),
    "gatv2": (_homograph, lambda g: GATv2Conv(6, 4, 3)),
    "sage-pool": (_homograph, lambda g: SAGEConv(6, 5, "pool")),
    "gin-max": (_homograph, lambda g: GINConv(nn.Linear(6, 5), "max")),
    "edgeconv": (_homograph, lambda g: EdgeConv(6, 5)),
    "gmm": (_homograph, WithPseudo),
    "rgcn": (lambda: random_heterograph(5), lambda g: RGCNConv(6, 5, _rels(g))),
    "rgat": (lambda: random_heterograph(5), lambda g: RGATConv(6, 2, _rels(g), num_heads=3)),
    "hgt": (lambda: random_heterograph(5), lambda g: HGTConv(6, 6, len(g.ntypes), _rels(g), num_heads=2)),
    "simple-hgn": (lambda: random_heterograph(5), lambda g: SimpleHGNConv(6, 2, _rels(g), 3, num_heads=3)),
}


@needs_kernels
@pytest.mark.filterwarnings("error::gnnc.FallbackWarning")  # an eager fallback would equal eager trivially
@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_models_equal_eager(name):
    """In float64, where the summation orders of eager and the kernels agree to 1e-9 (RGCN: the typed
    matmuls, delegated to torch, on a heterograph)."""
    make_graph, make_model = MODELS[name]
    g = make_graph().to(DEVICE)
    torch.manual_seed(0)
    model = make_model(g).to(DEVICE, torch.float64)
    x = torch.randn(g.num_nodes(), 6, device=DEVICE, dtype=torch.float64, requires_grad=True)
    loss = lambda out: sum(t.square().sum() for t in (out if isinstance(out, tuple) else (out,)))
    eager = model(g, x)
    want = (eager, *torch.autograd.grad(loss(eager), [x, *model.parameters()]))
    out = gnnc.compile(model, backend="triton")(g, x)
    got = (out, *torch.autograd.grad(loss(out), [x, *model.parameters()]))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOL[torch.float64])
    assert "[backend triton]" in gnnc.explain(model, g, x, backend="triton")


@pytest.mark.skipif(RUNNABLE, reason="the kernels ran in this process")
def test_in_interpreter_subprocess():
    """triton was imported in compiled mode before this module could ask for its interpreter: run this file
    in a fresh process that sets TRITON_INTERPRET=1 first."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__))],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
