"""Heterogeneous reference models (eager UDFs) against independent implementations.

Every model runs in float64 and eval mode through the eager executor; its
output and the gradients w.r.t. every parameter and every input must match
``tests/reference_hetero.py`` on random heterographs, a homogeneous graph
and graphs without edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import gnnc
from gnnc.models.hgt import HGTConv
from gnnc.models.rgat import RGATConv
from gnnc.models.rgcn import RGCNConv
from gnnc.models.simple_hgn import SimpleHGNConv

from . import reference_hetero as ref
from .graphs import random_heterograph, random_homograph

IN = 6
RTOL, ATOL = 1e-6, 1e-9


def _graph(name: str) -> gnnc.Graph:
    if name.startswith("hetero"):
        return random_heterograph(seed=int(name[-1]))
    if name == "homo":
        return random_homograph(num_nodes=12, num_edges=40, seed=3)
    if name == "no_edges_hetero":
        return gnnc.heterograph({("a", "r", "b"): ([], []), ("b", "s", "a"): ([], [])}, num_nodes={"a": 3, "b": 2})
    assert name == "no_edges_homo"
    return gnnc.graph(([], []), num_nodes=5)


GRAPHS = ["hetero0", "hetero1", "hetero2", "homo", "no_edges_hetero", "no_edges_homo"]


def _rels(g):
    return len(g.canonical_etypes)


def _types(g):
    return len(g.ntypes)


@dataclass(frozen=True)
class Case:
    build: Callable  # graph -> module
    reference: Callable  # (module, graph, *inputs) -> output(s)
    prev_attn: bool = False  # SimpleHGN: also feed the previous layer's attention


CASES = {
    "rgcn": Case(lambda g: RGCNConv(IN, 5, _rels(g)), ref.rgcn),
    "rgcn_bases": Case(lambda g: RGCNConv(IN, 5, _rels(g), num_bases=2, activation=torch.tanh), ref.rgcn),
    "rgcn_bare": Case(lambda g: RGCNConv(IN, 5, _rels(g), self_loop=False, bias=False), ref.rgcn),
    "rgat": Case(lambda g: RGATConv(IN, 4, _rels(g), num_heads=2, negative_slope=0.1), ref.rgat),
    "hgt": Case(lambda g: HGTConv(IN, IN, _types(g), _rels(g), num_heads=2), ref.hgt),
    "hgt_norm": Case(lambda g: HGTConv(IN, IN, _types(g), _rels(g), num_heads=3, dropout=0.5, use_norm=True), ref.hgt),
    "simple_hgn": Case(lambda g: SimpleHGNConv(IN, 4, _rels(g), edge_dim=3, num_heads=2), ref.simple_hgn),
    "simple_hgn_prev": Case(
        lambda g: SimpleHGNConv(IN, 4, _rels(g), edge_dim=3, num_heads=2, residual=False, beta=0.3),
        ref.simple_hgn,
        prev_attn=True,
    ),
}
ATTENTION = ["rgat", "hgt", "hgt_norm", "simple_hgn", "simple_hgn_prev"]


def _setup(case: Case, g, seed: int, scale: float = 1.0):
    """Module in float64 eval mode with every parameter perturbed, and its inputs."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    module = case.build(g).double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    x = scale * torch.randn(g.num_nodes(), IN, generator=gen, dtype=torch.float64)
    inputs = [x.requires_grad_()]
    if case.prev_attn:
        inputs.append(torch.rand(g.num_edges(), module.num_heads, generator=gen, dtype=torch.float64).requires_grad_())
    return module, inputs


def _run(fn, module, g, inputs, seed: int):
    """Outputs of ``fn`` and gradients of a random projection of them w.r.t. inputs and parameters."""
    outs = fn(module, g, *inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    gen = torch.Generator().manual_seed(seed + 1000)
    loss = sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum() for o in outs)
    names = [f"input {i}" for i in range(len(inputs))] + [n for n, _ in module.named_parameters()]
    targets = [*inputs, *module.parameters()]
    if loss.requires_grad:
        grads = torch.autograd.grad(loss, targets, allow_unused=True)
    else:  # nothing depends on a parameter or input (e.g. attention output on a graph with no edges)
        grads = [None] * len(targets)
    grads = [torch.zeros_like(t) if gr is None else gr for t, gr in zip(targets, grads)]
    return outs, dict(zip(names, grads))


def _eager(module, g, *inputs):
    return module(g, *inputs)


def _compare(case: Case, g, seed: int, scale: float = 1.0):
    module, inputs = _setup(case, g, seed, scale)
    outs, grads = _run(_eager, module, g, inputs, seed)
    ref_outs, ref_grads = _run(case.reference, module, g, inputs, seed)
    assert len(outs) == len(ref_outs)
    for i, (o, r) in enumerate(zip(outs, ref_outs)):
        assert o.shape == r.shape, f"output {i}: shape {tuple(o.shape)} vs reference {tuple(r.shape)}"
        assert torch.isfinite(o).all(), f"output {i} is not finite"
        torch.testing.assert_close(o, r, rtol=RTOL, atol=ATOL, msg=lambda m: f"output {i}: {m}")
    # Entries whose exact value is ~0 (e.g. through a saturated softmax) carry rounding
    # noise proportional to the largest gradient of the same backward pass.
    largest = max([float(gr.abs().max()) for gr in ref_grads.values() if gr.numel()], default=0.0)
    atol = max(ATOL, 1e-12 * largest)
    for name, gr in grads.items():
        assert torch.isfinite(gr).all(), f"gradient of {name} is not finite"
        torch.testing.assert_close(gr, ref_grads[name], rtol=RTOL, atol=atol, msg=lambda m: f"gradient of {name}: {m}")


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("model", list(CASES))
def test_matches_independent_implementation(model, graph):
    _compare(CASES[model], _graph(graph), seed=100 * GRAPHS.index(graph) + list(CASES).index(model))


@pytest.mark.parametrize("model", ATTENTION)
def test_large_logits_stay_finite_and_exact(model):
    # Inputs ~1e3 give attention logits far beyond exp's float64 range (~709).
    _compare(CASES[model], random_heterograph(seed=4), seed=11, scale=1e3)


def test_simple_hgn_attention_is_a_distribution_per_destination():
    g = random_heterograph(seed=1)
    module, (x,) = _setup(CASES["simple_hgn"], g, seed=5)
    _, attn = module(g, x)
    _, dst = g.find_edges()
    totals = torch.zeros(g.num_nodes(), 2, dtype=attn.dtype).index_add(0, dst, attn)
    has_in_edges = g.in_degrees() > 0
    torch.testing.assert_close(totals[has_in_edges], torch.ones_like(totals[has_in_edges]))
    assert (totals[~has_in_edges] == 0).all()


def test_nodes_without_in_edges_get_no_messages():
    g = random_heterograph(seed=0)
    isolated = g.in_degrees() == 0
    assert isolated.any()
    x = torch.randn(g.num_nodes(), IN, dtype=torch.float64)
    rgat = RGATConv(IN, 4, _rels(g), num_heads=2).double()
    assert (rgat(g, x)[isolated] == 0).all()
    rgcn = RGCNConv(IN, 5, _rels(g), bias=False).double()
    torch.testing.assert_close(rgcn(g, x)[isolated], x[isolated] @ rgcn.loop_weight)


def test_hgt_dropout_only_in_training():
    g = random_heterograph(seed=2)
    module = HGTConv(IN, IN, _types(g), _rels(g), num_heads=2, dropout=0.5).double()
    x = torch.randn(g.num_nodes(), IN, dtype=torch.float64)
    torch.manual_seed(0)
    trained = module.train()(g, x)
    evaluated = module.eval()(g, x)
    assert not torch.allclose(trained, evaluated)
    torch.testing.assert_close(evaluated, module(g, x), rtol=0, atol=0)


def test_hgt_requires_matching_widths_for_the_skip():
    with pytest.raises(ValueError, match="in_dim == out_dim"):
        HGTConv(IN, IN + 2, 3, 5, num_heads=2)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        HGTConv(IN, IN, 3, 5, num_heads=4)


def test_wrong_feature_width_is_named():
    g = random_heterograph(seed=0)
    with pytest.raises(ValueError, match=r"RGATConv: expected features of shape \[num_nodes, 6\]"):
        RGATConv(IN, 4, _rels(g))(g, torch.randn(g.num_nodes(), IN + 1))


def test_wrong_relation_count_is_reported():
    g = random_heterograph(seed=0)
    with pytest.raises(ValueError, match="leading dimension 2"):
        RGCNConv(IN, 5, num_rels=2)(g, torch.randn(g.num_nodes(), IN))


def test_simple_hgn_rejects_misshapen_previous_attention():
    g = random_heterograph(seed=0)
    module = SimpleHGNConv(IN, 4, _rels(g), edge_dim=3, num_heads=2)
    with pytest.raises(ValueError, match="prev_attn must have shape"):
        module(g, torch.randn(g.num_nodes(), IN), prev_attn=torch.rand(g.num_edges(), 3))
