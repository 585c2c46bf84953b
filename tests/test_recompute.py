"""Values rebuilt in backward (``gnnc.runtime.recompute``): same gradients as keeping them, nothing kept
alive, in-place changes caught, other saved-tensor hooks respected."""
import pytest
import torch

import gnnc
from gnnc import models
from gnnc.runtime import recompute
from tests.graphs import random_heterograph


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
