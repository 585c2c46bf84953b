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
    graphs = [
        random_homograph(12, 40, seed=0),
        gnnc.graph(([], []), num_nodes=3),
        random_homograph(5, 9, seed=1),
        gnnc.graph(([0], [0]), num_nodes=1),
        random_homograph(8, 20, seed=2),
    ]
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
        assert torch.equal(src[edge_start : edge_start + g.num_edges()], s + start)
        assert torch.equal(dst[edge_start : edge_start + g.num_edges()], d + start)
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
        rows.append(
            torch.zeros(4, dtype=v.dtype)
            if v.shape[0] == 0
            else getattr(v, op)(0)
            if op in ("sum", "mean")
            else getattr(v, "amax" if op == "max" else "amin")(0)
        )
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
            g.ndata["h"] = in_feat
            g.update_all(fn.copy_u("h", "m"), fn.mean("m", "h_N"))
            h = F.relu(self.W1(in_feat + g.ndata["h_N"]))
            g.ndata["h"], g.ndata["h_N"] = h, torch.zeros_like(h)  # kept where a graph has no edges (as DGL)
            g.update_all(
                lambda edges: {"m": edges.src["h"] * 0.5}, lambda nodes: {"h_N": nodes.mailbox["m"].max(1).values}
            )
            g.ndata["h"] = self.W2(g.ndata["h_N"] + h)
            return gnnc.mean_nodes(g, "h")


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
    grads = torch.autograd.grad(
        (got * torch.linspace(-1, 1, got.numel(), dtype=got.dtype).view_as(got)).sum(), [x, *run.parameters()]
    )
    alone = torch.cat([model(g, part) for g, part in zip(graphs, x.split([g.num_nodes() for g in graphs]))])
    expected = torch.autograd.grad(
        (alone * torch.linspace(-1, 1, alone.numel(), dtype=alone.dtype).view_as(alone)).sum(), [x, *model.parameters()]
    )
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


# DGL's batching API: expected numbers are DGL 2.1's on the same graphs
def _pair():
    """Graph one: 3 nodes, 2 edges; graph two: 1 node, a self loop; features ``h`` and ``w``."""
    one, two = gnnc.graph(([0, 1], [1, 2])), gnnc.graph(([0], [0]))
    one.ndata["h"], one.edata["w"] = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0])
    two.ndata["h"], two.edata["w"] = torch.tensor([4.0]), torch.tensor([3.0])
    return one, two


def _layout(g):
    return (
        [g.batch_num_nodes().tolist(), g.batch_num_edges().tolist()],
        [t.tolist() for t in g.find_edges()],
        g.ndata["h"].tolist(),
        g.edata["w"].tolist(),
    )


def test_a_batch_of_batches_counts_every_graph():
    one, two = _pair()
    nested = gnnc.batch([two, gnnc.batch([one, two])])
    assert nested.batch_size == 3
    assert _layout(nested) == (
        [[1, 3, 1], [1, 2, 1]],
        [[0, 1, 2, 4], [0, 2, 3, 4]],
        [4.0, 1.0, 2.0, 3.0, 4.0],
        [3.0, 1.0, 2.0, 3.0],
    )
    assert [_layout(g) for g in gnnc.unbatch(nested)] == [_layout(two), _layout(one), _layout(two)]


def test_batch_chooses_features_and_skips_graphs_without_rows():
    one, two = _pair()
    chosen = gnnc.batch([one, two], ndata=["h"], edata=[])
    assert chosen.ndata["h"].tolist() == [1.0, 2.0, 3.0, 4.0] and "w" not in chosen.edata
    assert list(gnnc.batch([one, two], ndata=None).ndata.keys()) == []
    empty = gnnc.graph(([], []), num_nodes=0)  # no rows: it need not have the features
    assert gnnc.batch([empty, one, empty]).ndata["h"].tolist() == [1.0, 2.0, 3.0]
    users = gnnc.heterograph({("u", "f", "u"): ([0, 1], [1, 2]), ("u", "p", "g"): ([], [])})
    players = gnnc.heterograph({("u", "f", "u"): ([0, 1], [1, 2]), ("u", "p", "g"): ([0, 1], [0, 0])})
    users.nodes["u"].data["h"], players.nodes["u"].data["h"] = torch.zeros(3, 1), torch.ones(3, 1)
    players.nodes["g"].data["h"], players.edges["p"].data["w"] = torch.tensor([[9.0]]), torch.tensor([[1.0], [2.0]])
    both = gnnc.batch([users, players])
    assert both.nodes["g"].data["h"].tolist() == [[9.0]] and both.edges["p"].data["w"].tolist() == [[1.0], [2.0]]
    apart = gnnc.unbatch(both)
    assert apart[0].nodes["g"].data["h"].shape == (0, 1) and apart[1].nodes["g"].data["h"].tolist() == [[9.0]]


def test_batch_feature_errors_say_what_differs():
    one, two = _pair()
    with pytest.raises(ValueError, match=r"batch\(ndata=...\) takes a list of feature names or None, got 'h'"):
        gnnc.batch([one, two], ndata="h")
    with pytest.raises(ValueError, match="node type '_N' of graph 0 has no feature 'x'"):
        gnnc.batch([one, two], ndata=["x"])
    two.ndata["h"] = torch.tensor([[4.0]])
    with pytest.raises(
        ValueError,
        match=r"feature 'h' of node type '_N' has rows of shape \(1,\) and torch.float32 "
        r"in graph 1, of shape \(\) and torch.float32 in graph 0",
    ):
        gnnc.batch([one, two])
    two.ndata["h"] = torch.tensor([4])
    with pytest.raises(ValueError, match="torch.int64 in graph 1"):
        gnnc.batch([one, two])
    with pytest.raises(ValueError, match="graph 0 is a block"):
        gnnc.batch([gnnc.to_block(one, torch.tensor([1, 2]))])


def test_unbatch_into_other_counts():
    one, two = _pair()
    b = gnnc.batch([one, two, one])
    for nodes, edges in (([4, 3], [3, 2]), (torch.tensor([4, 3]), torch.tensor([3, 2]))):
        first, second = gnnc.unbatch(b, node_split=nodes, edge_split=edges)
        assert _layout(first) == ([[4], [3]], [[0, 1, 3], [1, 2, 3]], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
        assert _layout(second) == _layout(one)
    with pytest.raises(ValueError, match=r"unbatch\(node_split\)\['_N'\]: counts \[4, 2\] do not split the graph's 7"):
        gnnc.unbatch(b, node_split=[4, 2], edge_split=[3, 2])
    with pytest.raises(ValueError, match="the node counts give 2 graphs but the edge counts 3"):
        gnnc.unbatch(b, node_split=[4, 3])
    with pytest.raises(ValueError, match=r"node id 3 at position 2 is out of range \[0, 2\)"):  # an edge across
        gnnc.unbatch(b, node_split=[2, 5], edge_split=[3, 2])
    hetero = gnnc.batch([gnnc.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])})] * 2)
    with pytest.raises(ValueError, match=r"unbatch\(node_split\): give a dict of counts by type"):
        gnnc.unbatch(hetero, node_split=[2, 2])
    whole = gnnc.unbatch(hetero, node_split={"a": [2], "b": [2]}, edge_split={"r": [2], ("b", "s", "a"): [2]})
    assert [t.tolist() for t in whole[0].find_edges("r")] == [[0, 1], [0, 1]]


def test_slice_batch_gives_one_graph_and_its_ids():
    one, two = _pair()
    b = gnnc.batch([one, two, one])
    assert _layout(gnnc.slice_batch(b, 1)) == _layout(two)
    last = gnnc.slice_batch(b, 2, store_ids=True)
    assert _layout(last) == _layout(one)
    assert last.ndata["_ID"].tolist() == [4, 5, 6] and last.edata["_ID"].tolist() == [3, 4]
    with pytest.raises(IndexError, match="graph 3 of a batch of 3 graphs"):
        gnnc.slice_batch(b, 3)


def test_set_batch_counts_declares_a_batch():
    g = gnnc.graph(([0, 1, 2, 3], [1, 0, 3, 2]))
    g.set_batch_num_nodes(torch.tensor([2, 2]))
    assert g.batch_size == 2 and g.batch_num_edges().tolist() == [4]  # edges: one graph's until declared (DGL's)
    g.set_batch_num_edges([2, 2])
    assert [[t.tolist() for t in part.find_edges()] for part in gnnc.unbatch(g)] == [[[0, 1], [1, 0]]] * 2
    with pytest.raises(ValueError, match=r"set_batch_num_nodes\['_N'\]: counts \[2, 3\] do not split the graph's 4"):
        g.set_batch_num_nodes(torch.tensor([2, 3]))
    hetero = gnnc.heterograph({("a", "r", "b"): ([0, 1], [0, 1])})
    with pytest.raises(ValueError, match="give a dict of counts by type"):
        hetero.set_batch_num_nodes([1, 1])
    hetero.set_batch_num_nodes({"a": [1, 1], "b": [1, 1]})
    hetero.set_batch_num_edges({"r": [1, 1]})
    assert hetero.batch_num_nodes("b").tolist() == [1, 1] and hetero.batch_num_edges().tolist() == [1, 1]
