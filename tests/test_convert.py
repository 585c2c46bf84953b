"""Converters: edge lists, SciPy, networkx and PyG, both directions."""

import sys

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import gnnc
from gnnc.graph import convert
from tests.graphs import random_heterograph, random_homograph

SEEDS = [0, 1]


def edge_pairs(g, etype=None):
    src, dst = g.find_edges(etype)
    return list(zip(src.tolist(), dst.tolist()))


def same_structure(a, b):
    assert a.ntypes == b.ntypes
    assert a.canonical_etypes == b.canonical_etypes
    assert [a.num_nodes(t) for t in a.ntypes] == [b.num_nodes(t) for t in b.ntypes]
    for rel in a.canonical_etypes:
        assert edge_pairs(a, rel) == edge_pairs(b, rel), rel


def featured_homograph(seed):
    g = random_homograph(12, 40, seed)
    gen = torch.Generator().manual_seed(seed)
    n, e = g.num_nodes(), g.num_edges()
    g.ndata["x"] = torch.randn(n, 5, generator=gen)
    g.ndata["y"] = torch.randint(0, 3, (n,), generator=gen)
    g.ndata["train_mask"] = torch.rand(n, generator=gen) > 0.5
    g.edata["edge_attr"] = torch.randn(e, 3, generator=gen)
    g.edata["weight"] = torch.rand(e, generator=gen)
    return g


def featured_heterograph(seed):
    """Node features of different widths per type, 'tag' featureless; edge features on some relations."""
    g = random_heterograph(seed)
    gen = torch.Generator().manual_seed(seed)
    g.nodes["user"].data["x"] = torch.randn(g.num_nodes("user"), 4, generator=gen)
    g.nodes["item"].data["x"] = torch.randn(g.num_nodes("item"), 2, generator=gen)
    g.nodes["item"].data["price"] = torch.rand(g.num_nodes("item"), generator=gen)
    g.edges["likes"].data["edge_attr"] = torch.randn(g.num_edges("likes"), 3, generator=gen)
    g.edges["follows"].data["edge_attr"] = torch.randn(g.num_edges("follows"), 6, generator=gen)
    g.edges["empty"].data["edge_attr"] = torch.zeros(0, 2)
    return g


# ----------------------------------------------------------------- edge lists
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_edge_list_round_trip_keeps_user_order(seed):
    g = random_homograph(12, 40, seed)
    edges = g.to_edge_list()
    assert edges.dtype == torch.int64 and edges.shape == (g.num_edges(), 2)
    assert [tuple(r) for r in edges.tolist()] == edge_pairs(g)
    same_structure(g, convert.from_edge_list(edges, num_nodes=g.num_nodes()))


def test_from_edge_list_accepts_pairs_arrays_and_empty_input():
    pairs = [(2, 0), (0, 1), (2, 0), (1, 1)]
    from_list = convert.from_edge_list(pairs)
    assert from_list.num_nodes() == 3 and edge_pairs(from_list) == pairs
    assert edge_pairs(convert.from_edge_list(np.array(pairs, dtype=np.int32), num_nodes=5)) == pairs
    empty = convert.from_edge_list([], num_nodes=4)
    assert (empty.num_nodes(), empty.num_edges()) == (4, 0)


def test_heterograph_edge_lists_are_local_per_relation_and_global_whole():
    g = random_heterograph(3)
    rebuilt = gnnc.heterograph(
        {rel: tuple(g.to_edge_list(rel).T) for rel in g.canonical_etypes},
        num_nodes={t: g.num_nodes(t) for t in g.ntypes},
    )
    same_structure(g, rebuilt)
    assert g.to_edge_list("empty").shape == (0, 2)
    assert set(g.to_edge_list("tagged")[:, 1].tolist()) == {0}
    whole = g.to_edge_list()
    assert [tuple(r) for r in whole.tolist()] == edge_pairs(g)
    assert int(whole.max()) >= g.num_nodes("user")  # global ids reach past the first type


@pytest.mark.parametrize(
    "edges, num_nodes, message",
    [
        ([(0, 1), (2, -1)], None, r"row 1: node id -1 is negative"),
        ([(0, 1), (5, 2)], 4, r"row 1: node id 5 is not below num_nodes=4"),
        (torch.zeros(2, 7, dtype=torch.int64), None, r"shape \[E, 2\].*transpose"),
        ([(0.5, 1.0)], None, r"integer node ids"),
    ],
)
def test_from_edge_list_rejects_bad_ids_and_shapes(edges, num_nodes, message):
    with pytest.raises(ValueError, match=message):
        convert.from_edge_list(edges, num_nodes=num_nodes)


# ---------------------------------------------------------------------- scipy
def dense_counts(g, etype=None, shape=None):
    out = np.zeros(shape or (g.num_nodes(), g.num_nodes()))
    src, dst = g.find_edges(etype)
    np.add.at(out, (src.numpy(), dst.numpy()), 1)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_scipy_coo_round_trip_keeps_multi_edges_and_user_order(seed):
    g = random_homograph(12, 40, seed)
    m = g.to_scipy()
    assert m.format == "coo" and m.shape == (12, 12) and m.nnz == g.num_edges()
    assert list(zip(m.row.tolist(), m.col.tolist())) == edge_pairs(g)
    np.testing.assert_array_equal(m.toarray(), dense_counts(g))
    back = convert.from_scipy(m)
    same_structure(g, back)
    assert "weight" not in back.edata  # unit entries carry no weight


@pytest.mark.parametrize("fmt, major", [("csr", 0), ("csc", 1)])
def test_scipy_compressed_orders_by_row_or_column_keeping_user_order_within(fmt, major):
    g = random_homograph(12, 40, 4)
    m = g.to_scipy(fmt=fmt)
    assert m.format == fmt and m.nnz == g.num_edges()
    np.testing.assert_array_equal(m.toarray(), dense_counts(g))
    expected = sorted(edge_pairs(g), key=lambda e: e[major])  # stable: user order within a row/column
    assert edge_pairs(convert.from_scipy(m)) == expected
    assert edge_pairs(convert.from_scipy(convert.from_scipy(m).to_scipy(fmt=fmt))) == expected


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_scipy_weights_round_trip(fmt):
    g = featured_homograph(0)
    back = convert.from_scipy(g.to_scipy(fmt=fmt))
    src, _ = g.find_edges()
    order = torch.arange(g.num_edges()) if fmt == "coo" else torch.argsort(src, stable=True)
    assert edge_pairs(back) == [edge_pairs(g)[i] for i in order.tolist()]
    torch.testing.assert_close(back.edata["weight"], g.edata["weight"][order])
    ones = convert.to_scipy(g, fmt=fmt, weight_key=None)
    assert ones.dtype == np.float32 and np.all(ones.data == 1)
    assert list(convert.from_scipy(g.to_scipy(fmt=fmt), weight_key=None).edata) == []


def test_from_scipy_stores_entries_under_weight_key():
    m = sp.coo_array((np.array([2.0, 0.5, 1.0]), (np.array([0, 1, 1]), np.array([1, 0, 1]))), shape=(3, 3))
    g = convert.from_scipy(m, weight_key="w")
    assert edge_pairs(g) == [(0, 1), (1, 0), (1, 1)] and g.num_nodes() == 3
    torch.testing.assert_close(g.edata["w"], torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64))


def test_to_scipy_heterograph_per_relation_and_global():
    g = random_heterograph(2)
    for st, rel, dt in g.canonical_etypes:
        m = g.to_scipy((st, rel, dt), fmt="csr")
        shape = (g.num_nodes(st), g.num_nodes(dt))
        assert m.shape == shape and m.nnz == g.num_edges(rel)
        np.testing.assert_array_equal(m.toarray(), dense_counts(g, rel, shape))
    assert g.to_scipy("empty").nnz == 0 and g.to_scipy("tagged").shape == (7, 1)
    whole = g.to_scipy()
    assert whole.shape == (g.num_nodes(), g.num_nodes())
    assert list(zip(whole.row.tolist(), whole.col.tolist())) == edge_pairs(g)


def test_to_scipy_rejects_unusable_weights_and_formats():
    g = random_heterograph(0)
    g.edges["likes"].data["weight"] = torch.rand(g.num_edges("likes"))
    assert g.to_scipy("likes").data.tolist() == g.edges["likes"].data["weight"].tolist()
    with pytest.raises(ValueError, match="pass etype= or weight_key=None"):
        g.to_scipy()
    h = random_homograph(6, 10)
    h.edata["weight"] = torch.rand(h.num_edges(), 2)
    with pytest.raises(ValueError, match=r"shape \(16, 2\)"):
        h.to_scipy()
    with pytest.raises(ValueError, match="unknown format 'dia'"):
        convert.to_scipy(h, fmt="dia", weight_key=None)


def test_from_scipy_rejects_non_square_and_dense_input():
    with pytest.raises(ValueError, match=r"square matrix, got shape \(3, 4\)"):
        convert.from_scipy(sp.random(3, 4, density=0.5, format="csr", random_state=0))
    with pytest.raises(TypeError, match="scipy.sparse"):
        convert.from_scipy(np.eye(3))


# ------------------------------------------------------------------- networkx
@pytest.mark.parametrize("seed", SEEDS)
def test_networkx_round_trip_keeps_multi_edges_order_and_attributes(seed):
    nx = pytest.importorskip("networkx")
    g = featured_homograph(seed)
    nxg = g.to_networkx(node_attrs=["x", "y"], edge_attrs=["edge_attr"])
    assert isinstance(nxg, nx.MultiDiGraph)
    assert nxg.number_of_nodes() == g.num_nodes() and nxg.number_of_edges() == g.num_edges()
    back = convert.from_networkx(nxg, ["x", "y"], ["edge_attr"], edge_id_attr="id")
    same_structure(g, back)
    for k in ("x", "y"):
        torch.testing.assert_close(back.ndata[k], g.ndata[k])
    torch.testing.assert_close(back.edata["edge_attr"], g.edata["edge_attr"])
    unordered = convert.from_networkx(nxg)
    assert sorted(edge_pairs(unordered)) == sorted(edge_pairs(g))


def test_from_networkx_undirected_gives_both_directions_and_sorted_nodes():
    nx = pytest.importorskip("networkx")
    u = nx.Graph()
    u.add_nodes_from([("c", {"h": [3.0]}), ("a", {"h": [1.0]}), ("b", {"h": [2.0]})])
    u.add_edge("a", "b", w=0.5)
    u.add_edge("b", "c", w=0.25)
    u.add_edge("c", "c", w=2.0)
    g = convert.from_networkx(u, node_attrs=["h"], edge_attrs=["w"])
    assert g.num_nodes() == 3
    torch.testing.assert_close(g.ndata["h"], torch.tensor([[1.0], [2.0], [3.0]]))
    # as DGL 2.1: relabelled (nodes in insertion order c, a, b; b's neighbours c then a), then made directed
    assert edge_pairs(g) == [(2, 1), (2, 2), (0, 1), (1, 2), (1, 0)]
    assert g.edata["w"].tolist() == [0.25, 2.0, 0.5, 0.25, 0.5]


def test_from_networkx_multigraph_keeps_parallel_edges():
    nx = pytest.importorskip("networkx")
    m = nx.MultiDiGraph()
    m.add_edges_from([(0, 1), (0, 1), (1, 1), (1, 0)])
    assert sorted(edge_pairs(convert.from_networkx(m))) == [(0, 1), (0, 1), (1, 0), (1, 1)]


def test_to_networkx_heterograph_marks_types_and_keeps_global_structure():
    pytest.importorskip("networkx")
    g = featured_heterograph(0)
    nxg = g.to_networkx(node_attrs=["x"], edge_attrs=["edge_attr"])
    tag0, user0 = g.num_nodes("item"), g.num_nodes("item") + 1  # global ids in DGL's type order: item, tag, user
    assert nxg.nodes[user0]["ntype"] == "user" and nxg.nodes[tag0]["ntype"] == "tag"
    torch.testing.assert_close(nxg.nodes[user0]["x"], g.nodes["user"].data["x"][0])
    assert "x" not in nxg.nodes[tag0]  # featureless type
    edges = {d["id"]: (u, v, d) for u, v, d in nxg.edges(data=True)}
    assert edges[0][2]["etype"] == ("item", "liked_by", "user")  # the first relation in DGL's order
    u, v, d = edges[g.index.rel_offsets[g.etype_id("likes")]]
    assert d["etype"] == ("user", "likes", "item")
    torch.testing.assert_close(d["edge_attr"], g.edges["likes"].data["edge_attr"][0])
    back = convert.from_networkx(nxg, edge_id_attr="id")
    assert edge_pairs(back) == edge_pairs(g) and back.num_nodes() == g.num_nodes()


def test_networkx_bad_inputs_raise_clear_errors(monkeypatch):
    nx = pytest.importorskip("networkx")
    g = random_homograph(6, 10)
    with pytest.raises(KeyError, match="no node feature 'h'"):
        g.to_networkx(node_attrs=["h"])
    with pytest.raises(ValueError, match="reserved"):
        g.to_networkx(edge_attrs=["id"])
    d = nx.DiGraph([(0, 1), (1, 2)])
    d.nodes[0]["h"] = 1.0
    with pytest.raises(KeyError, match="node 1 has no attribute 'h'"):
        convert.from_networkx(d, node_attrs=["h"])
    with pytest.raises(ValueError, match="each id 0..1 exactly once"):
        convert.from_networkx(nx.DiGraph([(0, 1, {"id": 0}), (1, 2, {"id": 0})]), edge_id_attr="id")
    with pytest.raises(ValueError, match="needs a directed graph"):
        convert.from_networkx(nx.Graph([(0, 1)]), edge_id_attr="id")
    with pytest.raises(TypeError, match="convert_node_labels_to_integers"):
        convert.from_networkx(nx.DiGraph([(0, "a")]))
    monkeypatch.setitem(sys.modules, "networkx", None)
    with pytest.raises(ImportError, match="pip install networkx"):
        g.to_networkx()


# ------------------------------------------------------------------------ PyG
@pytest.mark.parametrize("seed", SEEDS)
def test_pyg_data_round_trip(seed):
    pyg = pytest.importorskip("torch_geometric.data")
    g = featured_homograph(seed)
    data = g.to_pyg()
    assert isinstance(data, pyg.Data) and data.num_nodes == g.num_nodes()
    assert torch.equal(data.edge_index, torch.stack(g.find_edges()))
    back = convert.from_pyg(data)
    same_structure(g, back)
    assert sorted(back.ndata) == ["train_mask", "x", "y"] and sorted(back.edata) == ["edge_attr", "weight"]
    for k in back.ndata:
        assert torch.equal(back.ndata[k], g.ndata[k])
    for k in back.edata:
        assert torch.equal(back.edata[k], g.edata[k])


def test_from_pyg_data_keeps_node_and_edge_tensors_and_drops_graph_level():
    pyg = pytest.importorskip("torch_geometric.data")
    edge_index = torch.tensor([[0, 2, 2, 1, 1], [1, 0, 0, 1, 3]])
    data = pyg.Data(
        x=torch.randn(4, 3),
        y=torch.tensor([0, 1, 1, 0]),
        edge_index=edge_index,
        edge_attr=torch.randn(5, 2),
        val_mask=torch.tensor([True, False, True, False]),
        u=torch.randn(1, 7),
        name="toy",
    )
    g = convert.from_pyg(data)
    assert edge_pairs(g) == [(0, 1), (2, 0), (2, 0), (1, 1), (1, 3)]
    assert sorted(g.ndata) == ["val_mask", "x", "y"] and list(g.edata) == ["edge_attr"]
    assert torch.equal(g.edata["edge_attr"], data.edge_attr)


def test_from_pyg_unwraps_edge_index_subclass():
    pytest.importorskip("torch_geometric.data")
    from torch_geometric import EdgeIndex
    from torch_geometric.data import Data

    edge_index = EdgeIndex(torch.tensor([[0, 1, 2], [1, 2, 0]]), sparse_size=(3, 3))
    g = convert.from_pyg(Data(edge_index=edge_index, num_nodes=3))
    assert edge_pairs(g) == [(0, 1), (1, 2), (2, 0)]
    assert all(type(t) is torch.Tensor for t in g.find_edges())


def test_pyg_heterodata_round_trip_with_per_type_widths():
    pyg = pytest.importorskip("torch_geometric.data")
    g = featured_heterograph(1)
    data = g.to_pyg()
    assert isinstance(data, pyg.HeteroData)
    assert data.node_types == g.ntypes and data.edge_types == g.canonical_etypes
    assert data["tag"].num_nodes == 1 and data["tag", "empty", "user"].edge_index.shape == (2, 0)
    back = convert.from_pyg(data)
    same_structure(g, back)
    for t in g.ntypes:
        assert sorted(back.nodes[t].data) == sorted(g.nodes[t].data), t
        for k in g.nodes[t].data:
            assert torch.equal(back.nodes[t].data[k], g.nodes[t].data[k])
    for rel in g.canonical_etypes:
        assert sorted(back.edges[rel].data) == sorted(g.edges[rel].data), rel
        for k in g.edges[rel].data:
            assert torch.equal(back.edges[rel].data[k], g.edges[rel].data[k])
    assert back.edges["empty"].data["edge_attr"].shape == (0, 2)


def test_from_pyg_heterodata_infers_types_named_only_by_relations():
    pyg = pytest.importorskip("torch_geometric.data")
    data = pyg.HeteroData()
    data["paper"].x = torch.randn(3, 2)
    data["author", "writes", "paper"].edge_index = torch.tensor([[4, 0, 4], [2, 2, 0]])
    g = convert.from_pyg(data)
    assert g.ntypes == ["author", "paper"]  # sorted, as every graph's types (DGL's order)
    assert (g.num_nodes("paper"), g.num_nodes("author")) == (3, 5)
    assert edge_pairs(g, "writes") == [(4, 2), (0, 2), (4, 0)]
    assert data.node_types == ["paper"]  # the input was not modified


def test_pyg_bad_inputs_raise_clear_errors(monkeypatch):
    pytest.importorskip("torch_geometric.data")
    g = random_homograph(6, 10)
    g.ndata["h"] = torch.zeros(6)
    g.edata["h"] = torch.zeros(g.num_edges())
    with pytest.raises(ValueError, match=r"\['h'\] are both node and edge features"):
        g.to_pyg()
    with pytest.raises(TypeError, match="Data or HeteroData"):
        convert.from_pyg({"edge_index": torch.zeros(2, 0)})
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    with pytest.raises(ImportError, match="pip install torch_geometric"):
        g.to_pyg()
