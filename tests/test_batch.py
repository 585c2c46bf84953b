"""``gnnc.batch`` / ``unbatch`` and the readouts (DGL's graph-classification API).

Message passing on a batch must equal message passing on each graph apart, compiled and eager; readouts
must equal a loop over the graphs; batching and unbatching must give back every graph and feature.
"""
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import gnnc
import gnnc.function as fn
from tests.graphs import random_heterograph, random_homograph


def _homographs():
    """Graphs of a batch: zero in-degree nodes, self loops, multi-edges, one with no edges, one with one node."""
    graphs = [random_homograph(12, 40, seed=0), gnnc.graph(([], []), num_nodes=3),
              random_homograph(5, 9, seed=1), gnnc.graph(([0], [0]), num_nodes=1), random_homograph(8, 20, seed=2)]
    gen = torch.Generator().manual_seed(0)
    for g in graphs:
        g.ndata["h"] = torch.randn(g.num_nodes(), 4, generator=gen, dtype=torch.float64)
        g.ndata["w"] = torch.rand(g.num_nodes(), 1, generator=gen, dtype=torch.float64)
        g.edata["e"] = torch.randn(g.num_edges(), 2, generator=gen, dtype=torch.float64)
    return graphs


def test_batch_puts_graphs_side_by_side_and_unbatch_gives_them_back():
    graphs = _homographs()
    b = gnnc.batch(graphs)
    assert b.batch_size == len(graphs)
    assert b.batch_num_nodes().tolist() == [g.num_nodes() for g in graphs]
    assert b.batch_num_edges().tolist() == [g.num_edges() for g in graphs]
    src, dst = b.find_edges()
    start = edge_start = 0
    for g in graphs:
        s, d = g.find_edges()
        assert torch.equal(src[edge_start:edge_start + g.num_edges()], s + start)
        assert torch.equal(dst[edge_start:edge_start + g.num_edges()], d + start)
        start, edge_start = start + g.num_nodes(), edge_start + g.num_edges()
    for g, part in zip(graphs, gnnc.unbatch(b), strict=True):
        assert part.num_nodes() == g.num_nodes()
        assert all(torch.equal(a, c) for a, c in zip(part.find_edges(), g.find_edges()))
        for key in ("h", "w"):
            assert torch.equal(part.ndata[key], g.ndata[key])
        assert torch.equal(part.edata["e"], g.edata["e"])


def test_heterogeneous_batch_keeps_every_relation_and_type():
    graphs = [random_heterograph(seed=s) for s in range(3)]
    for i, g in enumerate(graphs):
        for t in g.ntypes:
            g.nodes[t].data["x"] = torch.full((g.num_nodes(t), 2), float(i))
    b = gnnc.batch(graphs)
    for r in b.canonical_etypes:
        assert b.batch_num_edges(r).tolist() == [g.num_edges(r) for g in graphs]
    for g, part in zip(graphs, gnnc.unbatch(b)):
        for r in g.canonical_etypes:
            assert all(torch.equal(a, c) for a, c in zip(part.find_edges(r), g.find_edges(r)))
        for t in g.ntypes:
            assert torch.equal(part.nodes[t].data["x"], g.nodes[t].data["x"])


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("weighted", [False, True])
def test_readouts_equal_a_loop_over_the_graphs(op, weighted):
    graphs = _homographs()
    b = gnnc.batch(graphs)
    weight = "w" if weighted else None
    x = b.ndata["h"].clone().requires_grad_()
    b.ndata["h"] = x
    got = gnnc.readout_nodes(b, "h", weight, op)
    rows = []
    for g, part in zip(graphs, x.split(b.batch_num_nodes().tolist())):
        v = part * g.ndata["w"] if weighted else part
        rows.append(torch.zeros(4, dtype=v.dtype) if v.shape[0] == 0 else getattr(v, op)(0) if op in ("sum", "mean")
                    else getattr(v, "amax" if op == "max" else "amin")(0))
    torch.testing.assert_close(got, torch.stack(rows))
    edges = gnnc.readout_edges(b, "e", op=op)
    assert edges.shape == (len(graphs), 2) and torch.equal(edges[1], torch.zeros(2, dtype=edges.dtype))
    assert torch.autograd.gradcheck(lambda t: gnnc.readout.readout_nodes(_with(b, t), "h", weight, op), (x,))


def _with(g, x):
    g.ndata["h"] = x
    return g


def test_broadcast_and_softmax_over_each_graph():
    b = gnnc.batch(_homographs())
    per_graph = torch.arange(b.batch_size, dtype=torch.float64).unsqueeze(1)
    owner = gnnc.broadcast_nodes(b, per_graph)
    assert owner.squeeze(1).tolist() == sum(([i] * n for i, n in enumerate(b.batch_num_nodes().tolist())), [])
    b.ndata["s"] = 50 * b.ndata["h"]  # large logits
    weights = gnnc.softmax_nodes(b, "s")
    b.ndata["a"] = weights
    totals = gnnc.sum_nodes(b, "a")
    nonempty = b.batch_num_nodes() > 0
    torch.testing.assert_close(totals[nonempty], torch.ones_like(totals[nonempty]))


class GCNClassifier(nn.Module):
    """DGL's graph-classification tutorial (blitz/5_graph_classification.py): two graph convolutions,
    ``dgl.mean_nodes`` readout; here one with a built-in message, one with UDFs."""

    def __init__(self, in_feats, h_feats, num_classes):
        super().__init__()
        self.W1, self.W2 = nn.Linear(in_feats, h_feats), nn.Linear(h_feats, num_classes)

    def forward(self, g, in_feat):
        with g.local_scope():
            g.ndata['h'] = in_feat
            g.update_all(fn.copy_u('h', 'm'), fn.mean('m', 'h_N'))
            h = F.relu(self.W1(in_feat + g.ndata['h_N']))
            g.ndata['h'], g.ndata['h_N'] = h, torch.zeros_like(h)  # kept where a graph has no edges (as DGL)
            g.update_all(lambda edges: {'m': edges.src['h'] * 0.5},
                         lambda nodes: {'h_N': nodes.mailbox['m'].max(1).values})
            g.ndata['h'] = self.W2(g.ndata['h_N'] + h)
            return gnnc.mean_nodes(g, 'h')


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_a_batch_classifies_each_graph_as_it_would_alone(compiled):
    torch.manual_seed(0)
    model = GCNClassifier(4, 5, 3).double()
    run = gnnc.compile(copy.deepcopy(model)) if compiled else copy.deepcopy(model)
    graphs = _homographs()
    x = torch.cat([g.ndata["h"] for g in graphs]).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = run(gnnc.batch(graphs), x)
    grads = torch.autograd.grad((got * torch.linspace(-1, 1, got.numel(), dtype=got.dtype).view_as(got)).sum(),
                                [x, *run.parameters()])
    alone = torch.cat([model(g, part) for g, part in zip(graphs, x.split([g.num_nodes() for g in graphs]))])
    expected = torch.autograd.grad((alone * torch.linspace(-1, 1, alone.numel(), dtype=alone.dtype)
                                    .view_as(alone)).sum(), [x, *model.parameters()])
    torch.testing.assert_close(got, alone)
    for a, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(a, e)


def test_batch_errors_name_the_graph():
    a, b = random_homograph(4, 6, seed=0), random_homograph(4, 6, seed=1)
    a.ndata["h"], b.ndata["x"] = torch.zeros(4, 1), torch.zeros(4, 1)
    with pytest.raises(ValueError, match=r"node type '_N' of graph 1 has features \['x'\], graph 0 has \['h'\]"):
        gnnc.batch([a, b])
    with pytest.raises(ValueError, match="graph 1 has node types"):
        gnnc.batch([a, random_heterograph(seed=0)])
    with pytest.raises(ValueError, match="at least one graph"):
        gnnc.batch([])
    looped = gnnc.batch([random_homograph(4, 6, seed=0)] * 2).add_self_loop()
    assert looped.batch_num_nodes().tolist() == [4, 4]
    with pytest.raises(ValueError, match="add self loops to each graph before gnnc.batch"):
        looped.batch_num_edges()
    with pytest.raises(ValueError, match="unknown readout 'median'"):
        gnnc.readout_nodes(a, "h", op="median")
    with pytest.raises(ValueError, match="graph_feat has 2 rows but the batch 3 graphs"):
        gnnc.broadcast_nodes(gnnc.batch([a] * 3), torch.zeros(2, 1))


def test_a_single_graph_is_a_batch_of_one():
    g = random_homograph(6, 10, seed=0)
    g.ndata["h"] = torch.randn(6, 3)
    assert g.batch_size == 1 and g.batch_num_nodes().tolist() == [6]
    torch.testing.assert_close(gnnc.sum_nodes(g, "h"), g.ndata["h"].sum(0, keepdim=True))
    torch.testing.assert_close(gnnc.max_nodes(g, "h"), g.ndata["h"].amax(0, keepdim=True))
