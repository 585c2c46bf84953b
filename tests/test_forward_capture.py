"""Whole-forward capture (``gnnc.forward.capture``) and the forward passes, against the model run eagerly.

Models are written as users write them: per-type linears applied by boolean masks (DGL's HGT example on a
homogeneous graph), a linear per head (DGL's GAT tutorial), plain tensor weights rebound after each step.
Each compiled forward and its parameter gradients must equal eager's; where capture cannot be sound it must
be refused and the forward run as written.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import natural_models  # bench/ is no package


@pytest.fixture(autouse=True)
def _fallbacks_fail():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        yield


def _graph(n=40, e=200, types=3, relations=4, seed=0, missing_type=None, self_loops=True):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, max(n - 3, 1), (e,), generator=gen)  # the last nodes get no in-edges
    if self_loops:
        src, dst = torch.cat([src, torch.arange(3)]), torch.cat([dst, torch.arange(3)])
        src, dst = torch.cat([src, src[:5]]), torch.cat([dst, dst[:5]])  # multi-edges
    g = gnnc.graph((src, dst), num_nodes=n)
    g.edata["rel_type"] = torch.randint(0, relations, (src.shape[0],), generator=gen)
    ntype = torch.randint(0, types, (n,), generator=gen)
    if missing_type is not None:
        ntype[ntype == missing_type] = (missing_type + 1) % types
    g.ndata["ntype"] = ntype
    return g


MaskedHGT = natural_models.HGTLayer  # DGL's HGT example on a homogeneous graph: per-type linears by masks
TutorialGAT = natural_models.MultiHeadGATLayer  # DGL's GAT tutorial: a layer per head, outputs concatenated


def _same(compiled, model, g, x, steps=1, seed=None, tol=1e-5):
    """Compiled and eager outputs and parameter gradients agree over ``steps`` SGD steps (the same
    optimizer updates both: they share the parameters)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        if seed is not None:
            torch.manual_seed(seed)
        ref = model(g, x)
        ref_grads = torch.autograd.grad(ref.square().sum(), list(model.parameters()), allow_unused=True)
        if seed is not None:
            torch.manual_seed(seed)
        out = compiled(g, x)
        grads = torch.autograd.grad(out.square().sum(), list(model.parameters()), allow_unused=True)
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        for a, b in zip(grads, ref_grads):
            if b is None:
                assert a is None
            else:
                torch.testing.assert_close(a, b, rtol=tol, atol=tol)
        opt.zero_grad()
        for p, gr in zip(model.parameters(), ref_grads):
            p.grad = gr
        opt.step()


@pytest.mark.parametrize(
    "case",
    [
        dict(seed=0),
        dict(seed=1, missing_type=1),
        dict(seed=2, n=1, e=1, self_loops=False),
        dict(seed=3, types=1),
        dict(seed=4, types=5, n=60, e=400),
    ],
)
def test_masked_per_type_hgt_is_rewritten_and_matches_eager(case):
    torch.manual_seed(case["seed"])
    g = _graph(**case)
    types = case.get("types", 3)
    model = MaskedHGT(8, 8, types, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x, steps=2)
    with torch.no_grad():  # inference: each type's rows gathered and written by index as the code reaches them
        torch.testing.assert_close(compiled(g, x), model(g, x))
    if types > 1:
        assert any(line.startswith("type_masks") for line in compiled.forward_log), compiled.forward_log
        assert any(line.startswith("merge_linears") for line in compiled.forward_log), compiled.forward_log
    assert set(g.ndata.keys()) == {"ntype"}  # the local scope was left


def test_dropout_draws_the_same_masks_as_eager():
    g = _graph(seed=5)
    model = MaskedHGT(8, 8, 3, 4, 2, dropout=0.5).double().train()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x, seed=123)
    assert any(line.startswith("type_masks") for line in compiled.forward_log)


def test_large_logits_and_float32():
    g = _graph(seed=6)
    model = MaskedHGT(8, 8, 3, 4, 2)
    with torch.no_grad():
        model.relation_pri.mul_(300.0)
    x = torch.randn(g.num_nodes(), 8) * 10
    _same(gnnc.compile(model), model, g, x, tol=1e-4)


def test_tutorial_gat_heads_share_one_matmul():
    g = _graph(seed=7)
    model = TutorialGAT(8, 4, 3).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x, steps=2)
    assert (
        compiled.forward_log[0]
        == "merge_linears: 3 linears on x1 (model.heads.0.fc, model.heads.1.fc, model.heads.2.fc) -> one matmul 8 x 12"
    )
    assert compiled.forward_log[1].startswith("batch_heads: 3 blocks")


def _scaled_exp(field, scale):
    def func(edges):
        return {field: torch.exp((edges.data[field] / scale).clamp(-5, 5))}

    return func


class NumpyScaledAttention(nn.Module):
    """The graph transformer's layer: a UDF made in forward over ``np.sqrt(d)`` (here a float32 scalar), and
    numpy scalars in the forward's own code."""

    def __init__(self, d):
        super().__init__()
        self.d, self.q, self.v = d, nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, g, h):
        g.ndata["q"], g.ndata["v"] = self.q(h), self.v(h)
        g.apply_edges(fn.u_dot_v("q", "q", "score"))
        g.apply_edges(_scaled_exp("score", np.float32(np.sqrt(self.d))))
        g.update_all(fn.u_mul_e("v", "score", "m"), fn.sum("m", "wv"))
        g.update_all(fn.copy_e("score", "s"), fn.sum("s", "z"))
        return np.float32(0.5) * g.ndata["wv"] / (g.ndata["z"] + np.float64(1e-6))


def test_numpy_scalars_in_the_forward_and_its_udfs_are_captured():
    g = _graph(seed=9)
    model = NumpyScaledAttention(8).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x, steps=2)
    assert not any("not captured" in line for line in compiled.forward_log), compiled.forward_log


def test_passes_can_be_switched_off():
    g = _graph(seed=8)
    model = MaskedHGT(8, 8, 3, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model, type_masks=False, merge_linears=False, release_features=False, fast_dropout=False)
    _same(compiled, model, g, x)
    assert compiled.forward_log == ["forward captured; no forward pass applies"]


class PlainTensorTypes(nn.Module):
    """Weights as plain tensors (rebound by the user after each step), per-type by masks."""

    def __init__(self, d, types):
        super().__init__()
        self.types = types
        self.w = [torch.randn(d, d, dtype=torch.float64, requires_grad=True) for _ in range(types)]
        self.scale = torch.ones(types, dtype=torch.float64, requires_grad=True)

    def forward(self, g, h):
        out = torch.zeros_like(h)
        for t in range(self.types):
            mask = g.ndata["ntype"] == t
            out[mask] = h[mask] @ self.w[t] * self.scale[t]
        g.ndata["o"] = out
        g.update_all(gnnc.function.copy_u("o", "m"), gnnc.function.sum("m", "o"))
        return g.ndata["o"]


def test_rebound_plain_tensors_are_read_live():
    g = _graph(seed=9)
    model = PlainTensorTypes(6, 3)
    compiled = gnnc.compile(model)
    x = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    for _ in range(3):
        torch.testing.assert_close(compiled(g, x), model(g, x))
        assert any(line.startswith("type_masks") for line in compiled.forward_log)
        out = compiled(g, x)
        grads = torch.autograd.grad(out.sum(), model.w + [model.scale])
        ref = torch.autograd.grad(model(g, x).sum(), model.w + [model.scale])
        for a, b in zip(grads, ref):
            torch.testing.assert_close(a, b)
        with torch.no_grad():  # rebinding, as users of plain tensors do after a step
            model.w = [(w - 0.1 * gr).requires_grad_() for w, gr in zip(model.w, grads)]
            model.scale = (model.scale - 0.1 * grads[-1]).requires_grad_()


def test_uncovered_rows_of_a_zero_buffer_stay_zero():
    g = _graph(seed=10, types=4)
    model = PlainTensorTypes(6, 3)  # type 3 is written by nobody: its rows keep zeros_like's zeros
    x = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    compiled = gnnc.compile(model)
    torch.testing.assert_close(compiled(g, x), model(g, x))
    assert any(line.startswith("type_masks") for line in compiled.forward_log)


class FactoryBuffer(nn.Module):
    """Per-type linears into ``torch.zeros(g.num_nodes(), d)`` / ``torch.empty(h.shape[0], d)``: factories
    given traced sizes, replayed with the call's."""

    def __init__(self, d, types, factory):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(types))
        self.factory = factory

    def forward(self, g, h):
        if self.factory == "zeros":
            out = torch.zeros(g.num_nodes(), h.shape[1], dtype=h.dtype)
        else:
            out = torch.empty(h.shape[0], h.shape[1], dtype=h.dtype)
        for t, lin in enumerate(self.lins):
            mask = g.ndata["ntype"] == t
            out[mask] = lin(h[mask])
        g.ndata["o"] = out
        g.update_all(fn.copy_u("o", "m"), fn.sum("m", "s"))
        return g.ndata.pop("s") + out


@pytest.mark.parametrize("factory", ["zeros", "empty"])
def test_tensor_factories_with_traced_sizes_are_captured(factory):
    g = _graph(seed=11, types=3)
    model = FactoryBuffer(4, 3, factory).double()
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x, steps=2)
    assert any(line.startswith("type_masks") for line in compiled.forward_log)
    bigger = _graph(n=55, seed=12, types=3)  # the sizes are the call's, not the first call's
    torch.testing.assert_close(
        compiled(bigger, torch.ones(55, 4, dtype=torch.float64)), model(bigger, torch.ones(55, 4, dtype=torch.float64))
    )


# ----------------------------------------------------------------------------- refused captures
class NoGrad(MaskedHGT):
    def forward(self, g, h):
        with torch.no_grad():
            h = h * 1.0
        return super().forward(g, h)


class Branch(MaskedHGT):
    def forward(self, g, h):
        if h.sum() > 0:
            h = h * 2
        return super().forward(g, h)


class KeepsInput(MaskedHGT):
    def forward(self, g, h):
        self.last_input = h
        return super().forward(g, h)


class ListsInputs(MaskedHGT):
    def __init__(self, *args):
        super().__init__(*args)
        self.seen = []

    def forward(self, g, h):
        self.seen.append(h)
        return super().forward(g, h)


class InPlace(MaskedHGT):
    def forward(self, g, h):
        h = h.clone()
        h.mul_(2.0)
        return super().forward(g, h)


class ClosureOverTracedValue(MaskedHGT):
    def forward(self, g, h):
        w = self.skip * 2

        def message(edges):
            return {"m": edges.src["ntype"].unsqueeze(-1) * w[0]}

        g.update_all(message, gnnc.function.sum("m", "extra"))
        return super().forward(g, h) + g.ndata.pop("extra")


class GraphInternals(MaskedHGT):
    def forward(self, g, h):
        return super().forward(g, h * g.batch_size)


class ChecksGraphType(MaskedHGT):
    def forward(self, g, h):
        if not isinstance(g, gnnc.Graph):
            h = h * 0
        return super().forward(g, h)


@pytest.mark.parametrize(
    "kind,why",
    [
        (NoGrad, "no_grad"),
        (Branch, "not captured"),
        (KeepsInput, "changes the model's state"),
        (ListsInputs, "changes the model's state"),
        (ClosureOverTracedValue, "closure made in forward"),
        (GraphInternals, "batch_size"),
    ],
)
def test_unsound_forwards_run_as_written(kind, why):
    g = _graph(seed=11)
    model = kind(8, 8, 3, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x)
    assert len(compiled.forward_log) == 1 and why in compiled.forward_log[0], compiled.forward_log
    assert "last_input" not in model.__dict__ or isinstance(model.last_input, torch.Tensor)
    assert all(isinstance(s, torch.Tensor) for s in getattr(model, "seen", []))


# fast_dropout leaves their dropout of p = 0 (the identity) as it is
@pytest.mark.parametrize(
    "kind,applies",
    [
        (ChecksGraphType, ["merge_linears", "release_features", "scope_deferral", "type_masks"]),
        (InPlace, ["release_features"]),
    ],
)  # in-place writes: not regrouped
def test_forwards_checking_the_graph_type_or_writing_in_place_still_compile(kind, applies):
    g = _graph(seed=12)
    model = kind(8, 8, 3, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    _same(compiled, model, g, x)
    assert sorted({line.split(":")[0] for line in compiled.forward_log}) == applies, compiled.forward_log


def test_a_changed_attribute_retraces():
    g = _graph(seed=13)
    model = PlainTensorTypes(6, 3)
    x = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    compiled = gnnc.compile(model)
    torch.testing.assert_close(compiled(g, x), model(g, x))
    model.types = 2  # the loop now covers types 0 and 1: type 2's rows keep zeros_like's zeros
    torch.testing.assert_close(compiled(g, x), model(g, x))
    assert any("g0.ndata['ntype'] == c for c in [0, 1]:" in line for line in compiled.forward_log)


def test_a_users_error_is_raised_as_eager_raises_it_and_the_scope_is_left():
    g = _graph(seed=14)
    model = MaskedHGT(8, 8, 3, 4, 2).double()
    compiled = gnnc.compile(model)
    compiled(g, torch.randn(g.num_nodes(), 8, dtype=torch.float64))
    bad = torch.randn(g.num_nodes(), 5, dtype=torch.float64)  # 5 features where the linears take 8
    with pytest.raises(RuntimeError) as eager_error:
        model(g, bad)
    with pytest.raises(RuntimeError) as compiled_error:
        compiled(g, bad)
    assert str(compiled_error.value) == str(eager_error.value)
    assert set(g.ndata.keys()) == {"ntype"}


def test_explain_shows_the_forward_passes():
    g = _graph(seed=15)
    model = MaskedHGT(8, 8, 3, 4, 2)
    text = gnnc.explain(model, g, torch.randn(g.num_nodes(), 8))
    assert text.startswith("== forward: type_masks: 6 masks g0.ndata['ntype'] == c for c in [0, 1, 2]")
    assert "== forward: merge_linears: 3 linears" in text


def test_a_copy_of_a_compiled_model_captures_its_own_forward():
    import copy

    g = _graph(seed=16)
    model = MaskedHGT(8, 8, 3, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    compiled(g, x)
    twin = copy.deepcopy(compiled)
    with torch.no_grad():
        for p in twin.model.parameters():
            p.mul_(0.5)  # the copy's parameters, not the original's, must be read
    torch.testing.assert_close(twin(g, x), twin.model(g, x))
    torch.testing.assert_close(compiled(g, x), model(g, x))
    assert any(line.startswith("type_masks") for line in twin.forward_log)


def test_a_layout_made_while_evaluating_serves_training():
    g = _graph(seed=17)
    model = MaskedHGT(8, 8, 3, 4, 2).double()
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    compiled = gnnc.compile(model)
    with torch.inference_mode():
        compiled(g, x)
    _same(compiled, model, g, x)
    assert any(line.startswith("type_masks") for line in compiled.forward_log)


GLOBAL_FC = nn.Linear(6, 6).double()


def global_message(edges):
    return {"m": GLOBAL_FC(edges.src["a"])}


class UserStyles(nn.Module):
    """UDFs as users write them, inside a forward that capture rewrites (two linears on x): a module-level
    function reading a global module, default-argument closures made in a loop, a plain tensor attribute
    the user rebinds after each step, an update reading the feature it overwrites."""

    def __init__(self):
        super().__init__()
        self.fa, self.fb = nn.Linear(6, 6), nn.Linear(6, 6)
        self.per_call = nn.ModuleList([nn.Linear(6, 6) for _ in range(2)])
        self.w = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)

    def forward(self, g, x):
        g.ndata["a"], g.ndata["b"] = self.fa(x), self.fb(x)
        g.update_all(global_message, gnnc.function.sum("m", "s"))
        for k in range(2):

            def message(edges, k=k, mod=self.per_call[k]):
                return {"m": mod(edges.src["b"]) * (k + 1)}

            g.update_all(message, gnnc.function.mean("m", f"t{k}"))

        def update(nodes):
            return {"h": torch.relu(nodes.data["h"] @ self.w + nodes.data["t0"]) - nodes.data["t1"] * nodes.data["s"]}

        g.update_all(gnnc.function.copy_u("a", "m"), gnnc.function.sum("m", "h"), update)
        return g.ndata.pop("h")


def test_user_styles_inside_a_captured_forward_give_eagers_numbers_over_two_steps():
    g = _graph(seed=18)
    model = UserStyles().double()
    compiled = gnnc.compile(model)
    x = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    for _ in range(2):
        wrt = [*model.parameters(), *GLOBAL_FC.parameters(), model.w]
        ref = model(g, x)
        ref_grads = torch.autograd.grad(ref.square().sum(), wrt)
        out = compiled(g, x)
        grads = torch.autograd.grad(out.square().sum(), wrt)
        assert compiled.forward_log[0].startswith("merge_linears: 2 linears on x1 (model.fa, model.fb)")
        torch.testing.assert_close(out, ref)
        for a, b in zip(grads, ref_grads):
            torch.testing.assert_close(a, b)
        with torch.no_grad():
            for p, gr in zip(wrt[:-1], ref_grads[:-1]):
                p.sub_(0.1 * gr)
            model.w = (model.w - 0.1 * ref_grads[-1]).requires_grad_()  # rebound, as users of plain tensors do


class RebindsAPlainTensor(MaskedHGT):
    """A plain tensor weight, rebound after each step, read by a UDF made in forward through a default."""

    def __init__(self, *args):
        super().__init__(*args)
        self.gain = torch.ones(1, dtype=torch.float64, requires_grad=True)

    def forward(self, g, h):
        def message(edges, gain=self.gain):
            return {"m": edges.src["ntype"].unsqueeze(-1) * gain}

        with g.local_scope():
            g.update_all(message, gnnc.function.sum("m", "extra"))
            return super().forward(g, h) + g.ndata["extra"]


def test_a_default_holding_the_models_tensor_is_not_replayed_after_the_user_rebinds_it():
    g = _graph(seed=13)
    x = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    outputs = []
    for compile_ in (False, True):
        torch.manual_seed(0)
        model = RebindsAPlainTensor(8, 8, 3, 4, 2).double()
        run = gnnc.compile(model) if compile_ else model
        seen = []
        for _ in range(3):
            out = run(g, x)
            (grad,) = torch.autograd.grad(out.square().sum(), [model.gain])
            model.gain = (model.gain - 0.1 * grad).detach().requires_grad_()
            seen += [out.detach(), grad]
        outputs.append(seen)
        if compile_:
            assert "closure made in forward" in run.forward_log[0], run.forward_log
    for eager, compiled in zip(*outputs):
        torch.testing.assert_close(compiled, eager)
