"""Values gnnc keeps from a user's tensor (edge scalars in internal order, type groupings, per-type row
layouts) follow writes torch does not count: through ``.numpy()`` views and ``.data``. After such a write
between two compiled calls, the compiled call gives eager's numbers, by a compiled plan."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import recording
from gnnc.graph.value_cache import ByContents, same_bits

NUM_RELS = 4


def _graph(seed, n=60, e=300, in_user_order=False):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    if in_user_order:  # edges sorted by destination: the graph keeps the user's order (no permutation)
        dst, order = dst.sort(stable=True)
        src = src[order]
    g = gnnc.graph((src, dst), num_nodes=n)
    assert (g.index.user_eid is None) == in_user_order
    g.edata["w"] = torch.rand(e, 1, generator=gen)
    g.edata["rel_type"] = torch.randint(0, NUM_RELS, (e,), generator=gen)
    g.ndata["ntype"] = torch.randint(0, 3, (n,), generator=gen)
    return g, torch.randn(n, 4, generator=gen)


class UMulESum(nn.Module):
    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "o"))
            return g.ndata["o"]


class TypedSum(nn.Module):
    """DGL's entity-classification RGCN message: a weight per relation read by ``edges.data['rel_type']``."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(NUM_RELS, 4, 4))

    def message(self, edges):
        return {"m": torch.bmm(edges.src["h"].unsqueeze(1), self.weight[edges.data["rel_type"]]).squeeze(1)}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(self.message, fn.sum("m", "o"))
            return g.ndata["o"]


class PerTypeLinear(nn.Module):
    """The per-type mask idiom (DGL's HGT): ``out[ntype == t] = lin_t(h[ntype == t])``."""

    def __init__(self):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, g, h):
        ntype = g.ndata["ntype"]
        out = torch.zeros_like(h)
        for t in range(3):
            out[ntype == t] = self.lins[t](h[ntype == t])
        with g.local_scope():
            g.ndata["x"] = out
            g.update_all(fn.copy_u("x", "m"), fn.sum("m", "o"))
            return g.ndata["o"] + out


def _compiled_matches(compiled, model, g, x):
    """The compiled call, run by a compiled plan (no fallback), equals eager's on the graph as it is now."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        with recording() as plans, torch.no_grad():
            got = compiled(g, x)
    assert plans and all(p.module is not None for p in plans)
    with torch.no_grad():
        torch.testing.assert_close(got, model(g, x), rtol=1e-6, atol=1e-6)


def _write_through_numpy(t):
    t.numpy()[...] = t.numpy()[::-1] * 2  # a new order and scale; the version counter does not move


def _write_through_data(t):
    t.data.copy_(t.data.flip(0) * 2)  # ``.data`` has a version counter of its own


WRITES = {"numpy": _write_through_numpy, "data": _write_through_data}


@pytest.mark.parametrize("write", WRITES)
def test_u_mul_e_sum_follows_a_write_to_the_edge_weights(write):
    g, x = _graph(1)
    model = UMulESum()
    compiled = gnnc.compile(model)
    _compiled_matches(compiled, model, g, x)
    version = g.edata["w"]._version
    WRITES[write](g.edata["w"])
    assert g.edata["w"]._version == version  # what the old cache keyed on did not change
    _compiled_matches(compiled, model, g, x)


@pytest.mark.parametrize("in_user_order", [False, True])
@pytest.mark.parametrize("write", WRITES)
def test_a_relation_feature_follows_a_write(write, in_user_order):
    """Relation ids read by ``weight[edges.data['rel_type']]``: their internal-order copy (a graph that
    permutes its edges) and their grouping by type (bound as the user's own tensor otherwise)."""
    g, x = _graph(2, in_user_order=in_user_order)
    model = TypedSum()
    compiled = gnnc.compile(model)
    _compiled_matches(compiled, model, g, x)
    types = g.edata["rel_type"]
    WRITES[write](types)
    types.numpy()[...] %= NUM_RELS
    _compiled_matches(compiled, model, g, x)


@pytest.mark.parametrize("write", WRITES)
def test_the_per_type_mask_idiom_follows_a_write_to_the_node_types(write):
    g, x = _graph(3)
    model = PerTypeLinear()
    compiled = gnnc.compile(model)
    _compiled_matches(compiled, model, g, x)
    assert any(line.startswith("type_masks") for line in compiled.forward_log)
    types = g.ndata["ntype"]
    WRITES[write](types)
    types.numpy()[...] %= 3
    _compiled_matches(compiled, model, g, x)
    assert any(line.startswith("type_masks") for line in compiled.forward_log)


def test_by_contents_serves_a_value_only_for_the_same_bits():
    cache = ByContents(2)
    t = torch.tensor([1.0, -0.0, float("nan")])
    cache.put(t, "made", key=("k",))
    assert cache.get(t, ("k",)) == "made"  # NaN is the same NaN
    assert cache.get(t, ("other",)) is None
    t.numpy()[1] = 0.0  # -0.0 -> 0.0: equal as numbers, not as bits
    assert cache.get(t, ("k",)) is None
    assert not same_bits(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    held = [torch.tensor([i]) for i in range(3)]
    for i, h in enumerate(held):
        cache.put(h, i)
    assert [cache.get(h) for h in held] == [None, 1, 2]  # least recently used first out


def test_a_private_type_tensor_keeps_its_grouping_by_the_object(monkeypatch):
    """An internal-order copy only gnnc holds is grouped once and then found with no comparison of contents;
    an in-place change through torch is still seen."""
    from gnnc.backend.pytorch import index_matmul

    types = torch.tensor([2, 0, 1, 0])
    index_matmul.mark_private(types)
    first = index_matmul.grouping(types, 3)

    def compared(*args):
        raise AssertionError("contents compared")

    monkeypatch.setattr(index_matmul, "_same_contents", compared)
    assert index_matmul.grouping(types, 3) is first
    monkeypatch.undo()
    types[0] = 1
    assert index_matmul.grouping(types, 3).perm.tolist() == [1, 3, 0, 2]
