"""DGL's heterograph API that its tests reach (issue 40): relation slices with wildcards (flattened graphs),
``_etype2canonical``, ``to_heterogeneous(metagraph=...)`` and ``to_homogeneous``'s feature rule. Expected values were printed by DGL 2.1 for the same calls."""
import networkx as nx
import pytest
import torch

import gnnc


def _games(idtype=torch.int64):
    g = gnnc.heterograph({("user", "follows", "user"): ([0, 1], [1, 2]),
                          ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
                          ("user", "wishes", "game"): ([0, 2], [1, 0]),
                          ("developer", "develops", "game"): ([0, 1], [0, 1])}, idtype=idtype)
    g.nodes["user"].data["h"] = torch.arange(15.).view(3, 5)
    g.nodes["game"].data["h"] = torch.arange(10.).view(2, 5) + 100
    g.edges["plays"].data["e"] = torch.arange(8.).view(4, 2)
    g.edges["wishes"].data["e"] = -torch.arange(4.).view(2, 2)
    g.edges["wishes"].data["f"] = torch.ones(2, 3)
    return g


def test_wildcard_slice_flattens_relations_as_dgl():
    g = _games(torch.int32)
    fg = g["user", :, "game"]
    assert fg.ntypes == ["user", "game"] and fg.canonical_etypes == [("user", "plays+wishes", "game")]
    assert fg.idtype == torch.int32 and (fg.num_nodes(), fg.num_edges()) == (5, 6)
    assert [t.tolist() for t in fg.edges()] == [[0, 1, 2, 1, 0, 2], [0, 0, 1, 1, 1, 0]]
    assert fg.edata["e"].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7], [0, -1], [-2, -3]]
    assert "f" not in fg.edata  # only on one of the two relations
    assert fg.edata["_TYPE"].tolist() == [2, 2, 2, 2, 3, 3] and fg.edata["_TYPE"].dtype == torch.int32
    assert fg.edata["_ID"].tolist() == [0, 1, 2, 3, 0, 1]
    assert fg.nodes["game"].data["_TYPE"].tolist() == [1, 1] and fg.nodes["user"].data["_ID"].tolist() == [0, 1, 2]
    assert fg.nodes["user"].data["h"].equal(g.nodes["user"].data["h"])
    fg = g[:, :, :]
    assert fg.ntypes == ["developer+user", "game+user"]
    assert fg.etypes == ["develops+follows+plays+wishes"]
    assert [t.tolist() for t in fg.edges()] == [[0, 1, 2, 3, 2, 3, 4, 3, 2, 4], [0, 1, 3, 4, 0, 0, 1, 1, 1, 0]]
    assert fg.nodes["developer+user"].data["_TYPE"].tolist() == [0, 0, 2, 2, 2]
    assert "h" not in fg.nodes["developer+user"].data  # developers have nodes and no 'h'
    assert fg.nodes["game+user"].data["h"][:, 0].tolist() == [100, 105, 0, 5, 10]


def test_wildcard_slice_of_one_relation_is_its_view_and_same_types_make_one_node_type():
    g = gnnc.heterograph({("user", "follows", "user"): ([0, 1, 2], [1, 2, 3]),
                          ("user", "knows", "user"): ([0, 2], [2, 3])})
    g.ndata["x"] = torch.arange(4.)
    fg = g["user", :, :]
    assert fg.canonical_etypes == [("user", "follows+knows", "user")]
    assert [t.tolist() for t in fg.edges()] == [[0, 1, 2, 0, 2], [1, 2, 3, 2, 3]]
    assert fg.ndata["x"].tolist() == [0, 1, 2, 3] and fg.edata["_TYPE"].tolist() == [0, 0, 0, 1, 1]
    view = g["user", "follows", :]
    view.edata["w"] = torch.ones(3)  # a view: written through to the graph
    assert g.edges["follows"].data["w"].tolist() == [1, 1, 1]
    with pytest.raises(KeyError, match="unknown relation"):
        g["user", :, "game"]
    with pytest.raises(ValueError, match="slice syntax"):
        g["user", 0:1, "user"]


def test_a_name_several_relations_share_flattens_them():
    g = gnnc.heterograph({("a", "r", "b"): ([0], [1]), ("b", "r", "a"): ([0], [1])})
    fg = g["r"]
    assert fg.canonical_etypes == [("a+b", "r+r", "a+b")]
    assert [t.tolist() for t in fg.edges()] == [[0, 2], [3, 1]]
    assert g._etype2canonical == {"r": ()}
    assert _games()._etype2canonical["plays"] == ("user", "plays", "game")
    assert (_games().get_ntype_id("game"), _games().get_etype_id(("user", "wishes", "game"))) == (1, 3)


def test_relation_view_finds_edges_by_id():
    g = _games()
    assert [t.tolist() for t in g["plays"].find_edges([3, 0])] == [[1, 0], [1, 0]]


def test_to_heterogeneous_takes_dgls_metagraph():
    g = gnnc.graph(([0, 1, 2, 0], [1, 2, 0, 2]))
    g.ndata["_TYPE"] = torch.tensor([0, 1, 0])
    g.edata["_TYPE"] = torch.tensor([0, 1, 0, 0])
    g.edata["e"] = torch.tensor([1., 2., 3., 4.])
    mg = nx.MultiDiGraph([("a", "b", "r"), ("b", "a", "s"), ("a", "a", "r"), ("b", "b", "r")])
    inferred = gnnc.to_heterogeneous(g, ["a", "b"], ["r", "s"])
    given = gnnc.to_heterogeneous(g, ["a", "b"], ["r", "s"], metagraph=mg)
    assert inferred.canonical_etypes == [("a", "r", "a"), ("a", "r", "b"), ("b", "s", "a")]
    assert given.canonical_etypes == [("a", "r", "a"), ("a", "r", "b"), ("b", "r", "b"), ("b", "s", "a")]
    assert given.num_edges(("b", "r", "b")) == 0
    for hg in (inferred, given):
        assert [t.tolist() for t in hg.edges(etype=("a", "r", "a"))] == [[1, 0], [0, 1]]
        assert hg.edges[("a", "r", "a")].data["e"].tolist() == [3.0, 4.0]
        assert hg.edges[("a", "r", "a")].data["_ID"].tolist() == [2, 3]


def test_to_homogeneous_combines_features_as_dgl():
    """DGL reads the features on the types with nodes: a type without nodes need not hold them, and one a
    later type lacks is dropped; two row shapes raise."""
    g = gnnc.heterograph({("A", "x", "B"): ([0, 1], [1, 0]), ("B", "y", "C"): ([], [])}, {"A": 2, "B": 2, "C": 0})
    g.nodes["A"].data["f"] = torch.tensor([1., 2.])
    g.nodes["B"].data["f"] = torch.tensor([3., 4.])
    g.nodes["A"].data["only"] = torch.tensor([5., 6.])
    assert gnnc.to_homogeneous(g, ndata=["f"]).ndata["f"].tolist() == [1, 2, 3, 4]
    assert sorted(gnnc.to_homogeneous(g, ndata=["f", "only"]).ndata) == ["_ID", "_TYPE", "f"]
    g.nodes["B"].data["f"] = torch.tensor([[3.], [4.]])
    with pytest.raises(ValueError, match="Cannot concatenate column f"):
        gnnc.to_homogeneous(g, ndata=["f"])
