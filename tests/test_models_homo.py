"""Reference models in ``gnnc.models`` against independent implementations.

Everything runs in float64 and eval mode; outputs and gradients (w.r.t.
every parameter, the node features and the edge inputs) must match
``tests/reference_homo.py`` to rtol 1e-6.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch.nn import functional as F

import gnnc
from gnnc.models.edgeconv import EdgeConv
from gnnc.models.gat import GAT, GATConv
from gnnc.models.gcn import GCN, GCNConv
from gnnc.models.gcnn import GCNNConv
from gnnc.models.monet import GMMConv

from . import reference_homo as ref
from .graphs import random_heterograph, random_homograph

IN = 6
RTOL, ATOL = 1e-6, 1e-9

GRAPHS = {
    "homo-seed0": lambda: random_homograph(12, 40, seed=0),
    "homo-seed1": lambda: random_homograph(20, 90, seed=1),
    "homo-seed2": lambda: random_homograph(5, 9, seed=2),
    "one-node-self-loop": lambda: gnnc.graph(([0], [0]), num_nodes=1),
    "one-node-no-edges": lambda: gnnc.graph(([], []), num_nodes=1),
    "no-edges": lambda: gnnc.graph(([], []), num_nodes=6),
    "hetero-whole-graph": lambda: random_heterograph(seed=3),
}


@dataclass(frozen=True)
class Case:
    make: Callable[[], torch.nn.Module]
    reference: Callable
    edge_dim: int | None = None  # width of the extra per-edge input, if the model takes one


CASES = {
    "gcn_conv": Case(lambda: GCNConv(IN, 5, activation=torch.tanh), ref.gcn_conv),
    "gcn_conv_no_bias": Case(lambda: GCNConv(IN, 3, bias=False), ref.gcn_conv),
    "gcn": Case(lambda: GCN(IN, 7, 3), ref.gcn),
    "gat_conv": Case(lambda: GATConv(IN, 4, 3, activation=F.elu), ref.gat_conv),
    "gat_conv_no_bias": Case(lambda: GATConv(IN, 2, 1, negative_slope=0.1, bias=False), ref.gat_conv),
    "gat": Case(lambda: GAT(IN, 3, 4, heads=2, out_heads=2), ref.gat),
    "gcnn_conv": Case(lambda: GCNNConv(IN, 2), ref.gcnn_conv, edge_dim=2),
    "edge_conv": Case(lambda: EdgeConv(IN, 5), ref.edge_conv),
    "edge_conv_hidden": Case(lambda: EdgeConv(IN, 5, hidden=8), ref.edge_conv),
    "gmm_sum": Case(lambda: GMMConv(IN, 5, 2, 3), ref.gmm_conv, edge_dim=2),
    "gmm_mean": Case(lambda: GMMConv(IN, 4, 3, 2, aggregator="mean"), ref.gmm_conv, edge_dim=3),
    "gmm_max": Case(lambda: GMMConv(IN, 4, 2, 3, aggregator="max", bias=False), ref.gmm_conv, edge_dim=2),
}


def build(case: Case, seed: int = 0) -> torch.nn.Module:
    """Module in float64 eval mode with every parameter redrawn (biases nonzero)."""
    torch.manual_seed(seed)
    module = case.make().double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.5 * torch.randn_like(p))
    return module


def inputs(case: Case, g, seed: int = 0, scale: float = 1.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(g.num_nodes(), IN, generator=gen, dtype=torch.float64)
    out = [x.requires_grad_()]
    if case.edge_dim is not None:
        out.append(torch.rand(g.num_edges(), case.edge_dim, generator=gen, dtype=torch.float64).requires_grad_())
    return out


def output_and_grads(fn, module, args):
    out = fn(*args)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    wrt = list(module.parameters()) + list(args[1:])
    grads = torch.autograd.grad((out * weights).sum(), wrt, allow_unused=True, materialize_grads=True)
    return out, grads


def assert_matches_reference(case: Case, g, scale: float = 1.0):
    module = build(case)
    args = [g] + inputs(case, g, scale=scale)
    out, grads = output_and_grads(module, module, args)
    want, want_grads = output_and_grads(lambda *a: case.reference(module, *a), module, args)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, want, rtol=RTOL, atol=ATOL)
    names = [n for n, _ in module.named_parameters()] + ["x", "edge input"][: len(args) - 1]
    for name, got, exp in zip(names, grads, want_grads):
        assert torch.isfinite(got).all(), name
        torch.testing.assert_close(got, exp, rtol=RTOL, atol=ATOL, msg=lambda m: f"grad of {name}: {m}")


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("case_name", CASES)
def test_matches_reference(case_name, graph_name):
    assert_matches_reference(CASES[case_name], GRAPHS[graph_name]())


@pytest.mark.parametrize("case_name", ["gat_conv", "gat_conv_no_bias", "gat"])
@pytest.mark.parametrize("graph_name", ["homo-seed0", "hetero-whole-graph"])
def test_attention_large_logits_stay_finite(case_name, graph_name):
    case, g = CASES[case_name], GRAPHS[graph_name]()
    module = build(case)
    first = module if isinstance(module, GATConv) else module.conv1
    x = inputs(case, g, scale=1e3)[0]
    logits, _ = ref.gat_logits(first, g, x.detach())
    assert logits.max() > 800, "case too mild: exp of these logits would not overflow float64"
    assert_matches_reference(case, g, scale=1e3)


@pytest.mark.parametrize("case_name", CASES)
def test_caller_graph_untouched(case_name):
    case = CASES[case_name]
    g = random_homograph(10, 30, seed=4)
    g.ndata["feat"] = torch.zeros(g.num_nodes(), 2)
    g.edata["weight"] = torch.ones(g.num_edges())
    build(case)(g, *inputs(case, g))
    assert sorted(g.ndata) == ["feat"] and sorted(g.edata) == ["weight"]


@pytest.mark.parametrize("case_name", ["gcn_conv", "gat_conv", "gmm_sum"])
def test_zero_in_degree_nodes_get_bias_only(case_name):
    g = gnnc.graph(([0, 1], [1, 1]), num_nodes=3)  # nodes 0 and 2 receive nothing
    case = CASES[case_name]
    module = build(case)
    out = module(g, *inputs(case, g))
    activation = getattr(module, "activation", None) or (lambda t: t)
    want = activation(module.bias).expand_as(out[[0, 2]])
    torch.testing.assert_close(out[[0, 2]], want, rtol=0, atol=0)


def test_gcn_conv_normalization_by_hand():
    # 0->2, 1->2, 1->0: c_out = [1, 1/sqrt2, 1], c_in = [1, 1, 1/sqrt2]
    g = gnnc.graph(([0, 1, 1], [2, 2, 0]), num_nodes=3)
    conv = GCNConv(1, 1, bias=False).double()
    with torch.no_grad():
        conv.weight.fill_(1.0)
    x = torch.tensor([[1.0], [2.0], [4.0]], dtype=torch.float64)
    s = 2**-0.5
    want = torch.tensor([[s * 2.0], [0.0], [s * 1.0 + s * s * 2.0]], dtype=torch.float64)
    torch.testing.assert_close(conv(g, x), want)


def test_gat_attention_dropout_only_in_training():
    g = random_homograph(12, 40, seed=0)
    torch.manual_seed(0)
    conv = GATConv(IN, 4, 2, attn_drop=0.9).double()
    x = torch.randn(g.num_nodes(), IN, dtype=torch.float64)
    conv.eval()
    torch.testing.assert_close(conv(g, x), ref.gat_conv(conv, g, x), rtol=RTOL, atol=ATOL)
    conv.train()
    assert not torch.allclose(conv(g, x), ref.gat_conv(conv.eval(), g, x))


@pytest.mark.parametrize("net_cls", [GCN, GAT])
def test_networks_train_step(net_cls):
    g = random_homograph(30, 120, seed=5)
    torch.manual_seed(0)
    net = net_cls(IN, 8, 7)
    x = torch.randn(g.num_nodes(), IN)
    labels = torch.randint(0, 7, (g.num_nodes(),))
    net.train()
    logits = net(g, x)
    assert logits.shape == (g.num_nodes(), 7)
    F.cross_entropy(logits, labels).backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name
    with torch.no_grad():
        assert not torch.allclose(net(g, x), net.eval()(g, x)), "dropout had no effect in training mode"


def test_gmm_rejects_unknown_aggregator():
    with pytest.raises(ValueError, match="aggregator 'median'"):
        GMMConv(IN, 4, 2, 3, aggregator="median")
