"""Values rebuilt in backward (``gnnc.backend.rebuild_in_backward``): same gradients as keeping them, nothing kept
alive, in-place changes caught, other saved-tensor hooks respected."""

import copy

import pytest
import torch

import gnnc
from gnnc import models
from gnnc.backend import rebuild_in_backward as recompute
from tests.graphs import random_heterograph, random_homograph


@pytest.fixture
def rebuilt(monkeypatch):
    """Every marked value is rebuilt (no size floor); the list of rebuilds made."""
    monkeypatch.setattr(recompute, "MIN_SHARE", 0)
    made = []
    monkeypatch.setattr(recompute, "_rebuilt", lambda note, f=recompute._rebuilt: made.append(note) or f(note))
    return made


def _hgt(backend="auto"):
    g = random_heterograph(5)
    torch.manual_seed(5)
    model = models.HGTConv(4, 4, len(g.ntypes), len(g.canonical_etypes), 2).double()
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    return g, model, x, gnnc.compile(model, backend=backend)


def test_nothing_stays_remembered_after_inference_or_backward(rebuilt):
    g, model, x, compiled = _hgt()
    with torch.no_grad():
        compiled(g, x)
    assert not recompute._REMEMBERED
    out = compiled(g, x)
    assert recompute._REMEMBERED  # k, q, v, ... while forward's graph holds them
    out.sum().backward()
    del out
    assert rebuilt and not recompute._REMEMBERED


def test_a_leaf_changed_in_place_before_backward_raises(rebuilt):
    g, model, x, compiled = _hgt()
    out = compiled(g, x)
    with torch.no_grad():
        model.k_weight.mul_(2.0)  # read only through the rebuilt k
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_other_saved_tensor_hooks_still_get_what_is_not_rebuilt(rebuilt):
    g, model, x, compiled = _hgt()
    eager_grads = torch.autograd.grad(model(g, x).sum(), [x, model.q_weight])
    packed = []

    def pack(t):
        packed.append(t.shape)
        return ("outer", t)

    def unpack(p):
        assert p[0] == "outer"
        return p[1]

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = compiled(g, x)
    grads = torch.autograd.grad(out.sum(), [x, model.q_weight])
    assert packed and rebuilt
    for c, e in zip(grads, eager_grads):
        torch.testing.assert_close(c, e)


_LINEAR = torch.nn.Linear(4, 4).double()


def _global_message(edges):  # a module-level UDF reading a global module
    return {"m": _LINEAR(edges.src["h"])}


class _PlainTensors(torch.nn.Module):
    """A plain tensor attribute rebound after each step; the update reads the feature it overwrites."""

    def __init__(self):
        super().__init__()
        self.w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        self.lin = torch.nn.Linear(8, 4).double()

    def forward(self, g, h):
        g.ndata["h"] = h
        g.update_all(
            _global_message,
            lambda nodes: {"m": nodes.mailbox["m"].mean(1)},
            lambda nodes: {
                "h": torch.tanh(self.lin(torch.cat([nodes.data["h"] @ self.w, nodes.data["m"]], -1))) * nodes.data["h"]
            },
        )
        return g.ndata.pop("h")


def test_natural_udfs_give_eager_numbers_over_two_steps_with_values_rebuilt(rebuilt):
    g = random_homograph(12, 40, 1)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    torch.manual_seed(0)
    eager = _PlainTensors()
    compiled_model = copy.deepcopy(eager)
    runs = []
    for model, run in ((eager, eager), (compiled_model, gnnc.compile(compiled_model))):
        outs = []
        for _ in range(2):
            out = run(g, x)
            params = [model.w, *model.lin.parameters()]
            grads = torch.autograd.grad((out * out).sum(), params)
            outs.append(out.detach())
            with torch.no_grad():
                model.w = (model.w - 0.1 * grads[0]).requires_grad_()  # rebound, as users of plain tensors do
                for p, grad in zip(params[1:], grads[1:]):
                    p -= 0.1 * grad
        runs.append((outs, [model.w.detach(), *(p.detach() for p in model.lin.parameters())]))
    assert rebuilt  # tanh(...) and the products read by the multiplication were rebuilt, not kept
    for got, want in zip(sum(runs[1], []), sum(runs[0], [])):
        torch.testing.assert_close(got, want)
