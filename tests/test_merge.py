"""``gnnc.merge`` (DGL's ``dgl.merge``): graphs laid over one another. Expected results are DGL 2.1's."""

import pytest
import torch

import gnnc


def _describe(g):
    out = {t: (g.num_nodes(t), {k: v.tolist() for k, v in sorted(g.nodes[t].data.items())}) for t in g.ntypes}
    for key in g.canonical_etypes:
        src, dst = g.find_edges(key)
        out[key] = (src.tolist(), dst.tolist(), {k: v.tolist() for k, v in sorted(g.edges[key].data.items())})
    return out


def test_merge_of_dgls_example():
    g = gnnc.graph((torch.tensor([0, 1]), torch.tensor([2, 3])))
    g.ndata["x"] = torch.zeros(4)
    h = gnnc.graph((torch.tensor([1, 2]), torch.tensor([0, 4])))
    h.ndata["x"] = torch.ones(5)
    assert _describe(gnnc.merge([g, h])) == {
        "_N": (5, {"x": [1.0] * 5}),
        ("_N", "_E", "_N"): ([0, 1, 1, 2], [2, 3, 0, 4], {}),
    }


def _three():
    a = gnnc.heterograph({("u", "r", "v"): ([0, 1], [1, 0]), ("v", "s", "u"): ([0], [0])})
    a.nodes["u"].data["h"] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    a.edges["r"].data["w"], a.edges["s"].data["w"] = torch.tensor([1.0, 2.0]), torch.tensor([5.0])
    b = gnnc.heterograph({("u", "r", "v"): ([2], [0]), ("v", "s", "u"): ([], [])}, {"u": 4, "v": 1})
    b.nodes["u"].data["h"] = torch.tensor([[9.0, 9.0], [8.0, 8.0], [7.0, 7.0], [6.0, 6.0]])
    b.nodes["v"].data["y"] = torch.tensor([5])
    b.edges["r"].data["w"], b.edges["r"].data["extra"] = torch.tensor([3.0]), torch.tensor([3.0])
    b.edges["s"].data["w"] = torch.zeros(0)
    c = gnnc.heterograph({("u", "r", "v"): ([0], [3]), ("v", "s", "u"): ([1], [1])})
    c.nodes["u"].data["h"] = torch.tensor([[0.0, 0.0], [-1.0, -1.0]])
    c.edges["r"].data["w"], c.edges["s"].data["w"] = torch.tensor([4.0]), torch.tensor([6.0])
    return a, b, c


def test_merge_takes_later_node_rows_and_the_first_graphs_edge_features():
    a, b, c = _three()
    merged = gnnc.merge([a, b, c])
    assert _describe(merged) == {
        "u": (4, {"h": [[0.0, 0.0], [-1.0, -1.0], [7.0, 7.0], [6.0, 6.0]]}),
        "v": (4, {"y": [5, 0, 0, 0]}),
        ("u", "r", "v"): ([0, 1, 2, 0], [1, 0, 0, 3], {"w": [1.0, 2.0, 3.0, 4.0]}),
        ("v", "s", "u"): ([0, 1], [0, 1], {"w": [5.0, 6.0]}),
    }
    assert gnnc.merge([a.int(), b.int()]).idtype == torch.int32


def test_merge_errors():
    a, b, _ = _three()
    with pytest.raises(KeyError, match="no edge feature 'extra'"):
        gnnc.merge([b, a])
    with pytest.raises(KeyError, match="unknown relation"):
        gnnc.merge([a, gnnc.graph(([0], [1]))])
    with pytest.raises(ValueError, match="at least one graph"):
        gnnc.merge([])
