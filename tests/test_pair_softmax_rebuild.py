"""RGAT's typed message under its attention with the pair table rebuilt in backward
(``gnnc.backend.cpu.rebuilt_pair_softmax_aggregate``, ``ops.etype_sddmm_softmax_aggregate``): the values and
gradients of the composition it replaces, nothing of the table's size kept or made whole in backward, exact
zeros where one edge takes all the weight, and compiled RGAT layers equal to eager with it on and off."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

pytest.importorskip("numba")

import gnnc
from gnnc import models
from gnnc.backend import cpu as cpu_backend
from gnnc.backend import pytorch as torch_backend
from gnnc.backend import rebuild_in_backward as recompute
from gnnc.backend.cpu import interop, pair_softmax_aggregate
from gnnc.ir.context import Pairs

from .graphs import random_heterograph
from .test_backend_torch import rand

pytestmark = pytest.mark.filterwarnings("error::gnnc.compiler.driver.FallbackWarning")  # a fallback is a failure here


def _typed_edges(case: str, num_nodes: int = 11, num_rels: int = 3, num_edges: int = 60, seed: int = 0):
    """(src, dst, rel) grouped by relation: multi-edges and self loops, the last third of the nodes without
    in-edges, relation 1 empty; ``shuffled``: the same edges in random order; ``one_node``: one node with
    loops in one relation; ``no_edges``."""
    gen = torch.Generator().manual_seed(seed)
    if case == "no_edges":
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty, empty, num_nodes, num_rels
    if case == "one_node":
        return (
            torch.zeros(4, dtype=torch.long),
            torch.zeros(4, dtype=torch.long),
            torch.zeros(4, dtype=torch.long),
            1,
            1,
        )
    rel = torch.randint(0, num_rels, (num_edges,), generator=gen)
    rel[rel == 1] = 0
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, (2 * num_nodes) // 3, (num_edges,), generator=gen)
    src[:4], dst[:4] = dst[:4], dst[:4]  # self loops
    src, dst, rel = (torch.cat([t, t[4:10]]) for t in (src, dst, rel))  # repeated edges
    order = torch.argsort(rel, stable=True) if case != "shuffled" else torch.randperm(rel.numel(), generator=gen)
    return src[order], dst[order], rel[order], num_nodes, num_rels


def _inputs(case, heads, feats, op, pair_b, dtype=torch.float64, scale=1.0):
    src, dst, rel, n, num_rels = _typed_edges(case)
    pairs = Pairs.build(rel, src, num_rels)
    k = 5
    x = rand(n, k, dtype=dtype, seed=1)
    weight = rand(num_rels, k, heads * feats, dtype=dtype, seed=2)
    a = (rand(pairs.count, heads, dtype=dtype, seed=3) * scale).detach().requires_grad_()
    if pair_b:
        dst_pairs = Pairs.build(rel, dst, num_rels)
        b, b_index = rand(dst_pairs.count, heads, dtype=dtype, positive=op == "div", seed=4), dst_pairs.edge_pair
    else:
        b, b_index = rand(n, heads, dtype=dtype, positive=op == "div", seed=4), None
    return dict(a=a, b=b, x=x, weight=weight, pairs=pairs, dst=dst, n=n, b_index=b_index)


def _both(t, heads, feats, op, slope):
    """(rebuilt, composition) outputs on inputs ``t``, each from its own copies of the leaves, and those copies."""
    runs = []
    for fn in (_rebuilt, _composition):
        leaves = {name: t[name].detach().clone().requires_grad_() for name in ("a", "b", "x", "weight")}
        runs.append((fn(leaves, t, heads, feats, op, slope), leaves))
    return runs


def _rebuilt(leaves, t, heads, feats, op, slope):
    pairs = t["pairs"]
    return cpu_backend.rebuilt_pair_softmax_aggregate(
        leaves["a"],
        leaves["b"],
        leaves["x"],
        leaves["weight"],
        pairs.node,
        pairs.rel_ptr,
        (heads, feats),
        pairs.edge_pair,
        t["dst"],
        t["n"],
        op,
        negative_slope=slope,
        b_index=t["b_index"],
    )


def _composition(leaves, t, heads, feats, op, slope):
    pairs = t["pairs"]
    z = torch_backend.gather_segment_matmul(leaves["x"], pairs.node, pairs.rel_ptr, leaves["weight"])
    return torch_backend.sddmm_softmax_aggregate(
        leaves["a"],
        leaves["b"],
        z.view(-1, heads, feats),
        pairs.edge_pair,
        t["dst"],
        t["n"],
        op,
        negative_slope=slope,
        b_index=t["b_index"],
    )


@pytest.mark.parametrize("case", ["multi", "shuffled", "no_edges", "one_node", "large_logits"])
# b by destination or per pair; (3, 4) float64 is a shape the cpu backend's own tests compile kernels for;
# (3, 50) runs as two blocks of heads and features
@pytest.mark.parametrize(
    "heads, feats, op, slope, pair_b",
    [(3, 4, "add", 0.2, False), (3, 4, "add", 0.2, True), (3, 4, "mul", None, True), (3, 50, "add", 0.0, True)],
)
@pytest.mark.parametrize("part_bytes", [1, 200, 1 << 26])  # backward's parts: a row, a few, whole relations
def test_same_values_and_gradients_as_the_composition(heads, feats, op, slope, pair_b, case, part_bytes):
    """Forward and the gradients of a, b, x and the weight, float64, on two threads (b's rows summed from two
    ranges)."""
    t = _inputs(
        "multi" if case == "large_logits" else case,
        heads,
        feats,
        op,
        pair_b,
        scale=300.0 if case == "large_logits" else 1.0,
    )
    with (
        mock.patch.object(pair_softmax_aggregate, "PART_BYTES", part_bytes),
        mock.patch.object(pair_softmax_aggregate, "FORWARD_PART_BYTES", 3 * part_bytes),
        mock.patch.object(interop, "PARALLEL_MIN_WORK", 0),
    ):
        (got, got_leaves), (want, want_leaves) = _both(t, heads, feats, op, slope)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)
        # large logits: the gradient of a sum, one value broadcast (read as it is, not copied)
        grad = rand(*want.shape, seed=7) if case != "large_logits" else torch.full((), 0.7).double().expand(want.shape)
        got.backward(grad)
        want.backward(grad)
    for name in ("a", "b", "x", "weight"):
        torch.testing.assert_close(got_leaves[name].grad, want_leaves[name].grad, rtol=1e-9, atol=1e-11, msg=name)


@pytest.mark.parametrize("needed", ["a", "b", "x", "weight"])
def test_one_gradient_at_a_time(needed):
    t = _inputs("multi", 3, 4, "add", True)
    with mock.patch.object(pair_softmax_aggregate, "PART_BYTES", 100):
        runs = _both(t, 3, 4, "add", 0.2)
        grads = [torch.autograd.grad(out, leaves[needed], rand(*out.shape, seed=3)) for out, leaves in runs]
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-9, atol=1e-11)


def test_nothing_of_the_table_size_is_kept_and_its_gradient_exists_a_part_at_a_time():
    """Backward makes the table whole once, for the destination loop's sums, and frees it; then z's gradient
    is made and consumed a part at a time."""
    heads, feats = 3, 4
    t = _inputs("multi", heads, feats, "add", True)
    rows = t["pairs"].count
    made = []

    def recording_empty(shape, like, dtype=None):
        made.append(tuple(shape))
        return interop.empty(shape, like, dtype)

    with (
        mock.patch.object(pair_softmax_aggregate, "PART_BYTES", 5 * heads * feats * 8),
        mock.patch.object(pair_softmax_aggregate, "empty", recording_empty),
    ):
        (out, _), _ = _both(t, heads, feats, "add", 0.2)
        assert not [
            s
            for s in out.grad_fn.saved_tensors
            if s is not None and s.is_floating_point() and s.numel() >= rows * heads * feats
        ]
        made.clear()
        out.backward(torch.ones_like(out))
    tables = [s for s in made if len(s) == 3]
    assert tables[0] == (rows, heads, feats) and tables[1:] and max(s[0] for s in tables[1:]) <= 5 < rows


@pytest.mark.parametrize("heads, feats, dtype", [(8, 8, torch.float32), (2, 20, torch.float64)])
def test_saturated_softmax_has_exactly_zero_logit_gradient(heads, feats, dtype):
    """Where one in-edge takes all the weight, d - t is exactly 0: both walks rebuild a part by the same
    product, and round d alike (see the cpu backend's test of ``sddmm_softmax_aggregate``)."""
    n = 200  # destination v < 100 has in-edges from 100 + v (score 200: all the weight) and (v + 1) % 100
    v = torch.arange(100)
    src, dst = torch.cat([100 + v, (v + 1) % 100]), torch.cat([v, v])
    order = torch.argsort(src)
    src, dst = src[order], dst[order]
    a = torch.cat([torch.zeros(100, heads), torch.full((100, heads), 200.0)]).to(dtype).requires_grad_()
    b = torch.zeros(n, heads, dtype=dtype, requires_grad=True)
    x = (rand(n, 6, seed=3) * 1e3).to(dtype)
    weight = rand(1, 6, heads * feats, seed=5).to(dtype)
    with (
        mock.patch.object(pair_softmax_aggregate, "PART_BYTES", 37 * heads * feats * 8),
        mock.patch.object(pair_softmax_aggregate, "FORWARD_PART_BYTES", 60 * heads * feats * 8),
    ):
        out = cpu_backend.rebuilt_pair_softmax_aggregate(
            a, b, x, weight, torch.arange(n), [0, n], (heads, feats), src, dst, n
        )
        out.backward(rand(n, heads, feats, seed=4).to(dtype))
    assert bool((b.grad == 0).all()) and bool((a.grad[100:] == 0).all())


@pytest.fixture
def every_table_rebuilt(monkeypatch):
    """No size floor; the calls of the rebuilt kernel made."""
    monkeypatch.setattr(recompute, "MIN_SHARE", 0)
    monkeypatch.setattr(pair_softmax_aggregate, "PART_BYTES", 64)
    monkeypatch.setattr(pair_softmax_aggregate, "FORWARD_PART_BYTES", 100)
    calls = []
    kernel = cpu_backend.rebuilt_pair_softmax_aggregate
    monkeypatch.setattr(
        cpu_backend, "rebuilt_pair_softmax_aggregate", lambda *a, **k: calls.append(1) or kernel(*a, **k)
    )
    return calls


def _two_steps(model, run, g, x):
    """Outputs and parameter gradients of two SGD steps on (out * out).sum()."""
    results = []
    for _ in range(2):
        out = run(g, x)
        params = list(model.parameters())
        grads = torch.autograd.grad((out * out).sum(), [x] + params)
        results += [out.detach(), *grads]
        with torch.no_grad():
            for p, grad in zip(params, grads[1:]):
                p -= 0.1 * grad
    return results


@pytest.mark.parametrize("recompute_on", [True, False])
def test_compiled_rgat_equals_eager_with_the_table_rebuilt_or_kept(every_table_rebuilt, recompute_on):
    g = random_heterograph(7)
    torch.manual_seed(3)
    eager = models.RGATConv(4, 4, len(g.canonical_etypes), num_heads=3).double()
    compiled_model = models.RGATConv(4, 4, len(g.canonical_etypes), num_heads=3).double()
    compiled_model.load_state_dict(eager.state_dict())
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    want = _two_steps(eager, eager, g, x)
    got = _two_steps(compiled_model, gnnc.compile(compiled_model, recompute=recompute_on), g, x)
    assert bool(every_table_rebuilt) == recompute_on
    for c, e in zip(got, want):
        torch.testing.assert_close(c, e)


def test_explain_shows_the_fused_operator_and_the_rebuild():
    g = random_heterograph(1)
    model = models.RGATConv(4, 4, len(g.canonical_etypes), num_heads=3)
    text = gnnc.explain(model, g, torch.randn(g.num_nodes(), 4))
    assert "etype_sddmm_softmax_aggregate" in text and "pair table rebuilt in backward" in text
    assert "pair table rebuilt" not in gnnc.explain(model, g, torch.randn(g.num_nodes(), 4), recompute=False)


def test_a_weight_of_the_wrong_shape_is_named():
    t = _inputs("multi", 3, 4, "add", True)
    pairs = t["pairs"]
    with pytest.raises(ValueError, match=r"weight must be \[R, K, M\] = \[3, 5, 12\]"):
        cpu_backend.rebuilt_pair_softmax_aggregate(
            t["a"],
            t["b"],
            t["x"],
            t["weight"][:, :4],
            pairs.node,
            pairs.rel_ptr,
            (3, 4),
            pairs.edge_pair,
            t["dst"],
            t["n"],
            b_index=t["b_index"],
        )


class _PlainTensorRGAT(torch.nn.Module):
    """RGAT as users of plain tensors write it: weights rebound after each step, UDFs as closures with a default
    argument, an update that reads the h it overwrites."""

    def __init__(self, num_rels, heads=3, dim=4, width=4):
        super().__init__()
        gen = torch.Generator().manual_seed(5)
        self.heads, self.dim = heads, dim
        self.w = (torch.randn(num_rels, width, heads * dim, generator=gen, dtype=torch.float64) / 2).requires_grad_()
        self.a = (torch.randn(num_rels, heads, 2 * dim, generator=gen, dtype=torch.float64) / 2).requires_grad_()

    def forward(self, g, x):
        heads, dim = self.heads, self.dim

        def message(edges, slope=0.2):
            w = edges.type["W"]
            z_src = torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze(1).view(-1, heads, dim)
            z_dst = torch.bmm(edges.dst["h"].unsqueeze(1), w).squeeze(1).view(-1, heads, dim)
            score = (torch.cat([z_src, z_dst], -1) * edges.type["a"]).sum(-1)
            return {"e": torch.nn.functional.leaky_relu(score, slope), "z": z_src}

        def reduce(nodes):
            alpha = torch.softmax(nodes.mailbox["e"], dim=1)
            return {"m": (alpha.unsqueeze(-1) * nodes.mailbox["z"]).sum(1).flatten(1)}

        with g.local_scope():
            g.ndata_all["h"], g.etype_data["W"], g.etype_data["a"] = x, self.w, self.a
            g.update_all(message, reduce, lambda nodes: {"h": torch.tanh(nodes.data["m"]) + nodes.data["h"][:, :1]})
            return g.ndata_all["h"]


def test_plain_tensors_rebound_after_each_step_give_eager_numbers(every_table_rebuilt):
    g = random_heterograph(5, edges_per_relation=40)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    runs = []
    for compiled in (False, True):
        model = _PlainTensorRGAT(len(g.canonical_etypes))
        run = gnnc.compile(model) if compiled else model
        results = []
        for _ in range(2):
            out = run(g, x)
            grads = torch.autograd.grad((out * out).sum(), [x, model.w, model.a])
            results += [out.detach(), *grads]
            model.w = (model.w - 0.1 * grads[1]).detach().requires_grad_()
            model.a = (model.a - 0.1 * grads[2]).detach().requires_grad_()
        runs.append(results)
    assert len(every_table_rebuilt) == 2
    for got, want in zip(runs[1], runs[0]):
        torch.testing.assert_close(got, want)
