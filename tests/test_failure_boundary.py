"""The compiler's failure boundary (``gnnc.failures``): an exception injected into any stage of capturing or
compiling a model ends in one ``FallbackWarning`` naming the stage and the user's line, and eager's numbers
(outputs and gradients); an error of the user's own is raised as eager raises it.

Each stage is reached in the run without injection (its entry function is called, no warning, eager's
numbers): a plain layer with UDFs (per-call stages), DGL's GAT tutorial with a layer per head
(``batch_heads``), HGT-style per-type masks around a call (``type_masks``), a layer in a local scope
(``release_features``, ``scope_deferral``), and R-GCN on a heterograph (the cost model).
"""

from __future__ import annotations

import importlib
import linecache
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import gnnc
import gnnc.compiler.passes
from gnnc.backend.cpu import interop
from gnnc.compiler import driver as compiled
from gnnc.forward import capture as forward
from gnnc.forward.replay import head_blocks, type_rows
from gnnc.ir import cost
from gnnc.ir import operators as ops
from gnnc.models.rgcn import RGCNConv
from gnnc.runtime import feature_release as scope_release
from gnnc.runtime import plan as plan_runner

from .graphs import random_heterograph
from .test_forward_passes import ReadsAcrossACall
from .test_scope_passes import Attention

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import natural_models  # bench/ is no package

COMPILE_MODULE = importlib.import_module("gnnc.compile")  # the module (``gnnc.compile`` is the function)


class PlainLayer(nn.Module):
    """One update_all with a message, a reduce and an update UDF."""

    def __init__(self, d=4):
        super().__init__()
        self.lin = nn.Linear(d, d).double()

    def message(self, edges):
        return {"m": edges.src["h"] * edges.data["w"]}

    def reduce(self, nodes):
        return {"s": nodes.mailbox["m"].sum(1)}

    def update(self, nodes):
        return {"o": torch.relu(self.lin(nodes.data["s"])) + nodes.data["h"]}

    def forward(self, g, h):
        g.ndata["h"] = h
        g.update_all(self.message, self.reduce, self.update)
        return g.ndata["o"]


def _homograph(n=20, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.cat([torch.randint(0, n, (70,), generator=gen), torch.arange(3)])
    dst = torch.cat([torch.randint(0, n - 3, (70,), generator=gen), torch.arange(3)])
    g = gnnc.graph((src, dst), num_nodes=n)
    g.edata["w"] = torch.rand(src.shape[0], 1, generator=gen, dtype=torch.float64)
    g.ndata["ntype"] = torch.randint(0, 3, (n,), generator=gen)
    return g


def _plain():
    return PlainLayer(), _homograph, torch.randn(20, 4, dtype=torch.float64)


def _gat():
    return natural_models.MultiHeadGATLayer(4, 3, 2).double(), _homograph, torch.randn(20, 4, dtype=torch.float64)


def _per_type():
    return ReadsAcrossACall().double(), _homograph, torch.randn(20, 4, dtype=torch.float64)


def _scoped():
    return Attention(after=("t", "q")), _homograph, torch.randn(20, 4, dtype=torch.float64)


def _rgcn():
    g = random_heterograph(seed=1)
    return (
        RGCNConv(6, 5, len(g.canonical_etypes)).double(),
        lambda: random_heterograph(seed=1),
        torch.randn(g.num_nodes(), 6, dtype=torch.float64),
    )


MODELS = {"plain": _plain, "gat": _gat, "per_type": _per_type, "scoped": _scoped, "rgcn": _rgcn}


# stage named in the warning -> (model, where its entry function is patched: (module, attribute) or a registry
# of passes (module, registry name, pass name)), and whether the user's line is the model's call of
# message passing (a per-call stage) or the call of the compiled model (a forward stage).
STAGES = {
    "capture": ("gat", (forward, "trace"), "model"),
    "forward pass graph_reads": ("gat", (COMPILE_MODULE, "FORWARD_PASSES", "graph_reads"), "model"),
    "forward pass type_masks": ("per_type", (COMPILE_MODULE, "FORWARD_PASSES", "type_masks"), "model"),
    "forward pass merge_linears": ("gat", (COMPILE_MODULE, "FORWARD_PASSES", "merge_linears"), "model"),
    "forward pass batch_heads": ("gat", (COMPILE_MODULE, "FORWARD_PASSES", "batch_heads"), "model"),
    "forward pass release_features": ("scoped", (COMPILE_MODULE, "FORWARD_PASSES", "release_features"), "model"),
    "forward pass scope_deferral": ("scoped", (COMPILE_MODULE, "FORWARD_PASSES", "scope_deferral"), "model"),
    "forward pass batch_heads at run time": ("gat", (head_blocks, "_program"), "model"),
    "forward pass type_masks at run time": ("per_type", (type_rows, "_shortcut"), "model"),
    "forward pass release_features at run time": ("scoped", (scope_release, "_keep_only"), "model"),
    "planning": ("plain", (compiled, "_read_signature"), "call"),
    "tracing": ("plain", (compiled, "trace_udf"), "call"),
    "building the MP-DFG": ("plain", (compiled, "build_update_all"), "call"),
    "plan binding": ("plain", (plan_runner, "bind_inputs"), "call"),
    "shape inference": ("plain", (compiled, "infer"), "call"),
    "pass lower_aggregation": ("plain", (gnnc.compiler.passes.pipeline, "PASSES", "lower_aggregation"), "call"),
    "pass fuse": ("gat", (gnnc.compiler.passes.pipeline, "PASSES", "fuse"), "model"),
    "lowering": ("plain", (compiled, "_finish"), "call"),
    "plan run": ("plain", (ops, "_kernels"), "call"),
    "code generation": ("gat", (interop, "_vectorizing"), "model"),
    "cost model": ("rgcn", (cost, "cheapest"), "model"),
}


class Injected(RuntimeError):
    pass


def _patch(monkeypatch, where, inject: bool) -> list:
    """Replace the entry function at ``where`` by one that records its calls and, with ``inject``, raises on
    the first; returns the record."""
    calls: list = []

    def spy(original):
        def entry(*args, **kwargs):
            calls.append(1)
            if inject and len(calls) == 1:
                raise Injected("injected")
            return original(*args, **kwargs)

        return entry

    if len(where) == 2:
        module, name = where
        monkeypatch.setattr(module, name, spy(getattr(module, name)))
    else:
        module, registry, entry = where
        passes = getattr(module, registry)
        if isinstance(passes, dict):  # the MP-DFG passes by name
            monkeypatch.setitem(passes, entry, spy(passes[entry]))
        else:  # the forward passes: (name, pass)
            monkeypatch.setattr(module, registry, tuple((n, spy(f) if n == entry else f) for n, f in passes))
    return calls


def _run(model, graph, x, how):
    """Outputs and parameter gradients of one training step of ``how`` (the model or its compiled form)."""
    out = how(graph(), x)
    params = [p for p in model.parameters() if p.requires_grad]
    return out, torch.autograd.grad(out.square().sum(), params, allow_unused=True)


def _step(model, graph, x, compiled_model):
    """Eager's and the compiled model's (outputs, gradients) of one step, and the FallbackWarnings issued."""
    expected = _run(model, graph, x, model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _run(model, graph, x, compiled_model)  # the compiled model's call: the user's line for forwards
    return expected, got, [w for w in caught if issubclass(w.category, gnnc.FallbackWarning)]


def _same(expected, got):
    torch.testing.assert_close(got[0], expected[0])
    for a, b in zip(got[1], expected[1]):
        assert (a is None) == (b is None)
        if b is not None:
            torch.testing.assert_close(a, b)


@pytest.fixture(autouse=True)
def _fresh_plans(monkeypatch):
    """Every stage runs anew: no trace, plan or kernel compiled by an earlier test is reused."""
    compiled.clear_cache()
    monkeypatch.setattr(interop, "_compiled", set())
    yield
    compiled.clear_cache()


def _stage_step(name: str, monkeypatch, inject: bool) -> list:
    """One step of stage ``name``'s model with its entry function patched: the stage is reached, and the step
    gives eager's numbers; returns the FallbackWarnings issued."""
    key, where, _ = STAGES[name]
    model, graph, x = MODELS[key]()
    calls = _patch(monkeypatch, where, inject)
    expected, got, fallbacks = _step(model, graph, x, gnnc.compile(model))
    assert calls, f"{name} was not reached"
    _same(expected, got)
    return fallbacks


@pytest.mark.parametrize("name", list(STAGES))
def test_each_stage_is_reached_without_injection(name, monkeypatch):
    fallbacks = _stage_step(name, monkeypatch, inject=False)
    assert not fallbacks, [str(w.message) for w in fallbacks]


@pytest.mark.parametrize("name", list(STAGES))
def test_a_failure_in_each_stage_falls_back_once_naming_the_stage_and_the_users_line(name, monkeypatch):
    fallbacks = _stage_step(name, monkeypatch, inject=True)
    assert len(fallbacks) == 1, [str(w.message) for w in fallbacks]
    message = str(fallbacks[0].message)
    assert f"{name} failed (Injected: injected)" in message, message
    path, number = re.search(r"called at (\S+):(\d+)\)", message).groups()
    assert (fallbacks[0].filename, fallbacks[0].lineno) == (path, int(number))  # issued at the user's line
    source = linecache.getline(path, int(number))
    if STAGES[name][2] == "model":
        assert path == __file__ and "how(graph(), x)" in source, (path, source)
    else:
        assert "update_all" in source, (path, source)


class MissingFeature(PlainLayer):
    def message(self, edges):
        return {"m": edges.src["missing"]}


class WrongShape(PlainLayer):
    def update(self, nodes):
        return {"o": nodes.data["s"] @ torch.ones(3, 3, dtype=torch.float64)}


class ForwardError(natural_models.MultiHeadGATLayer):
    def forward(self, g, h):
        return super().forward(g, h)[:, :2] + torch.ones(3, dtype=torch.float64)


@pytest.mark.parametrize(
    "kind, failing",
    [
        (MissingFeature, None),
        (WrongShape, None),
        (ForwardError, None),
        (MissingFeature, "tracing"),
        (WrongShape, "tracing"),
        (ForwardError, "capture"),
    ],
)
def test_the_users_own_error_is_raised_as_eager_raises_it(kind, failing, monkeypatch):
    """With ``failing``, a stage also fails first: the user's own error wins over the stage's failure."""
    model = kind(4, 3, 2).double() if kind is ForwardError else kind()
    x = torch.randn(20, 4, dtype=torch.float64)
    with pytest.raises(Exception) as eager_error:
        model(_homograph(), x)
    calls = [] if failing is None else _patch(monkeypatch, STAGES[failing][1], inject=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        with pytest.raises(type(eager_error.value)) as compiled_error:
            gnnc.compile(model)(_homograph(), x)
    assert str(compiled_error.value) == str(eager_error.value)
    assert compiled_error.value.__context__ is None  # as eager raises it: not chained to what gnnc caught
    assert len(calls) == (failing is not None)


class Accumulates(ReadsAcrossACall):
    """Writes back a graph feature it read before the code a forward pass rewrote."""

    def forward(self, g, h):
        g.ndata["acc"] = g.ndata["acc"] + 1
        return super().forward(g, h) * g.ndata["acc"]


def test_a_failed_replay_leaves_the_graph_as_it_found_it(monkeypatch):
    """The replay wrote 'acc' before it failed: the forward as written must read the graph's own 'acc'."""
    model, x = Accumulates().double(), torch.randn(20, 4, dtype=torch.float64)

    def graph():
        g = _homograph()
        g.ndata["acc"] = torch.zeros(20, 1, dtype=torch.float64)
        return g

    calls = _patch(monkeypatch, STAGES["forward pass type_masks at run time"][1], inject=True)
    expected, got, fallbacks = _step(model, graph, x, gnnc.compile(model))
    assert calls and len(fallbacks) == 1
    _same(expected, got)


def test_a_fallback_warning_reaches_code_run_by_exec_without_a_module_name():
    """Sphinx's doctests run code in globals whose ``__name__`` is None: warn_explicit dropped the warning."""
    source = (
        "box = lambda n: n.mailbox['m']\n"
        "g.update_all(lambda e: {'m': e.src['h']},\n"
        "             lambda n: {'s': box(n).sum(1) if box(n).sum() > 0 else box(n).max(1).values},\n"
        "             compile=True)\n"
    )
    g = gnnc.graph(([0, 1, 2], [1, 2, 0]))
    g.ndata["h"] = torch.ones(3, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # exec: only it runs code in globals without a __name__, as Sphinx's doctests do
        exec(compile(source, "<doctest default[0]>", "exec"), {"__name__": None, "g": g, "torch": torch})  # noqa: S102
    assert [w.category for w in caught] == [gnnc.FallbackWarning]
