"""DGL's graph transforms (gnnc.graph.derived, gnnc.graph.relabel): edge orders, ids and features.

Every expected value below was printed by DGL 2.1 on the same graphs.
"""

import warnings

import pytest
import torch

import gnnc
import gnnc.function as fn
from gnnc.graph import derived, relabel


def _multigraph():
    g = gnnc.graph((torch.tensor([0, 1, 1, 2, 2, 2, 3]), torch.tensor([1, 2, 2, 0, 0, 0, 3])))
    g.edata["w"] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    g.ndata["h"] = torch.arange(4.0)
    return g


def _edges(g, etype=None):
    src, dst = g.edges(etype=etype)
    return src.tolist(), dst.tolist()


def _data(view):
    return {k: v.tolist() for k, v in view.items()}


@pytest.mark.parametrize(
    "aggregator, w",
    [("arbitrary", [1.0, 2.0, 4.0, 7.0]), ("sum", [1.0, 5.0, 15.0, 7.0]), ("mean", [1.0, 2.5, 5.0, 7.0])],
)
def test_to_simple_merges_parallel_edges(aggregator, w):
    g = _multigraph()
    simple, mapping = derived.to_simple(g, writeback_mapping=True, copy_edata=True, aggregator=aggregator)
    assert _edges(simple) == ([0, 1, 2, 3], [1, 2, 0, 3])
    assert mapping.tolist() == [0, 1, 1, 2, 2, 2, 3]
    expected = {"count": [1, 2, 3, 1], "w": w}
    if aggregator == "arbitrary":
        expected["_ID"] = [0, 1, 3, 6]
    assert _data(simple.edata) == expected and _data(simple.ndata) == {"h": [0.0, 1.0, 2.0, 3.0]}


def test_add_reverse_edges_and_to_bidirected():
    g = _multigraph()
    both = derived.add_reverse_edges(g, copy_edata=True)
    assert _edges(both) == ([0, 1, 1, 2, 2, 2, 3, 1, 2, 2, 0, 0, 0], [1, 2, 2, 0, 0, 0, 3, 0, 1, 1, 2, 2, 2])
    assert both.edata["_ID"].tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5]
    assert both.edata["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    bidirected = derived.to_bidirected(g, copy_ndata=True)
    assert _edges(bidirected) == ([0, 0, 1, 1, 2, 2, 3], [1, 2, 0, 2, 0, 1, 3]) and list(bidirected.edata) == []
    bipartite = gnnc.heterograph({("a", "ab", "b"): ([0], [1])})
    with pytest.raises(ValueError, match="two node types"):
        derived.add_reverse_edges(bipartite)
    assert _edges(derived.add_reverse_edges(bipartite, ignore_bipartite=True)) == ([0], [1])


def test_reverse_copies_edge_features_only_when_asked():
    g = _multigraph()
    assert list(g.reverse().edata) == [] and list(g.reverse().ndata) == ["h"]
    back = g.reverse(copy_edata=True)
    assert _edges(back) == ([1, 2, 2, 0, 0, 0, 3], [0, 1, 1, 2, 2, 2, 3]) and torch.equal(back.edata["w"], g.edata["w"])


def test_line_graph_without_backtracking_and_khop():
    g = _multigraph()
    assert _edges(derived.line_graph(g, backtracking=False)) == (
        [0, 0, 1, 1, 1, 2, 2, 2, 3, 4, 5],
        [1, 2, 3, 4, 5, 3, 4, 5, 0, 0, 0],
    )
    assert _edges(derived.khop_graph(g, 2)) == (
        [0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3],
        [2, 2, 0, 0, 0, 0, 0, 0, 1, 1, 1, 3],
    )
    assert derived.khop_adj(g, 3).tolist() == [[6.0, 0, 0, 0], [0, 6.0, 0, 0], [0, 0, 6.0, 0], [0, 0, 0, 1.0]]
    assert derived.norm_by_dst(g).tolist() == pytest.approx([1.0, 0.5, 0.5, 1 / 3, 1 / 3, 1 / 3, 1.0])
    assert derived.laplacian_lambda_max(derived.to_bidirected(g)) == [pytest.approx(1.5)]


def test_khop_graph_runs_compiled_as_the_adjacency_power():
    g = derived.khop_graph(_multigraph(), 2)
    feat = torch.randn(4, 3)
    g.ndata["x"] = feat
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        g.update_all(fn.copy_u("x", "m"), fn.sum("m", "y"), compile=True)
    assert torch.allclose(g.ndata["y"], derived.khop_adj(_multigraph(), 2).T @ feat, atol=1e-5)


def test_metapath_reachable_graph():
    g = gnnc.heterograph({("a", "ab", "b"): ([0, 1, 2, 2], [1, 0, 1, 2]), ("b", "ba", "a"): ([0, 1, 2], [2, 0, 1])})
    g.nodes["a"].data["x"] = torch.arange(3.0)
    out = derived.metapath_reachable_graph(g, ["ab", "ba"])
    assert out.canonical_etypes == [("a", "_E", "a")] and _edges(out) == ([0, 1, 2, 2], [0, 2, 0, 1])
    assert out.ndata["x"].tolist() == [0.0, 1.0, 2.0]


def test_compact_graphs_orders_preserved_nodes_first():
    g = gnnc.heterograph(
        {
            ("game", "wished-by", "user"): ([6, 5], [7, 7]),
            ("user", "follow", "user"): ([1, 3], [3, 5]),
            ("user", "plays", "game"): ([2, 3, 2], [4, 4, 5]),
        },
        {"game": 10, "user": 20},
        idtype=torch.int32,
    )
    g.nodes["user"].data["x"] = torch.arange(20.0)
    g.edges["plays"].data["w"] = torch.tensor([1.0, 2.0, 3.0])
    out = relabel.compact_graphs(g, always_preserve={"game": torch.tensor([7, 4], dtype=torch.int32)})
    assert out.idtype == torch.int32
    assert _edges(out, "wished-by") == ([2, 3], [0, 0]) and _edges(out, "plays") == ([4, 2, 4], [1, 1, 3])
    assert out.nodes["game"].data["_ID"].tolist() == [7, 4, 6, 5]
    assert _data(out.nodes["user"].data) == {"_ID": [7, 1, 3, 5, 2], "x": [7.0, 1.0, 3.0, 5.0, 2.0]}
    first, second = relabel.compact_graphs([g, g.reverse()], copy_ndata=False)
    assert _edges(first, "plays") == ([4, 2, 4], [2, 2, 1]) and _edges(second, "plays") == ([2, 2, 1], [4, 2, 4])
    assert list(first.nodes["user"].data) == [] and first.num_nodes("game") == 3


@pytest.mark.parametrize(
    "options, edges, eids, nids",
    [
        (
            {"edge_permute_algo": "dst"},
            ([2, 2, 2, 0, 1, 1, 3], [0, 0, 0, 1, 2, 2, 3]),
            [3, 4, 5, 0, 1, 2, 6],
            [0, 1, 2, 3],
        ),
        (
            {"node_permute_algo": "rcmk"},
            ([0, 1, 1, 2, 2, 2, 3], [0, 2, 2, 3, 3, 3, 1]),
            [6, 1, 2, 3, 4, 5, 0],
            [3, 1, 2, 0],
        ),
        (
            {
                "node_permute_algo": "custom",
                "edge_permute_algo": "custom",
                "permute_config": {"nodes_perm": [2, 0, 3, 1], "edges_perm": [6, 5, 4, 3, 2, 1, 0]},
            },
            ([2, 0, 0, 0, 3, 3, 1], [2, 1, 1, 1, 0, 0, 3]),
            [6, 5, 4, 3, 2, 1, 0],
            [2, 0, 3, 1],
        ),
    ],
)
def test_reorder_graph(options, edges, eids, nids):
    g = _multigraph()
    out = relabel.reorder_graph(g, **options)
    assert _edges(out) == edges and out.edata["_ID"].tolist() == eids and out.ndata["_ID"].tolist() == nids
    assert torch.equal(out.edata["w"], g.edata["w"][eids]) and "_ID" not in g.edata
