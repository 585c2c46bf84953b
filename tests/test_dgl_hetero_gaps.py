"""DGL's heterograph API that its tests reach (issue 40): relation slices with wildcards (flattened graphs),
``_etype2canonical``, ``filter_nodes`` / ``filter_edges``, the batch's ``ntype`` / ``canonical_etype``,
``to_heterogeneous(metagraph=...)``, ``to_homogeneous``'s feature rule, feature casts, ``formats()`` and
``dgl.utils.is_sorted_srcdst``. Expected values were printed by DGL 2.1 for the same calls."""

import warnings

import networkx as nx
import numpy as np
import pytest
import torch

import gnnc
from gnnc.compat import dgl_utils
from gnnc.graph.casts import to_half


def _games(idtype=torch.int64):
    g = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1], [1, 2]),
            ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
            ("user", "wishes", "game"): ([0, 2], [1, 0]),
            ("developer", "develops", "game"): ([0, 1], [0, 1]),
        },
        idtype=idtype,
    )
    g.nodes["user"].data["h"] = torch.arange(15.0).view(3, 5)
    g.nodes["game"].data["h"] = torch.arange(10.0).view(2, 5) + 100
    g.edges["plays"].data["e"] = torch.arange(8.0).view(4, 2)
    g.edges["wishes"].data["e"] = -torch.arange(4.0).view(2, 2)
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
    g = gnnc.heterograph(
        {("user", "follows", "user"): ([0, 1, 2], [1, 2, 3]), ("user", "knows", "user"): ([0, 2], [2, 3])}
    )
    g.ndata["x"] = torch.arange(4.0)
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


def test_wildcard_slice_of_a_block_is_refused_where_it_would_flatten():
    """DGL's flattened block counts its destination nodes per side (4 here); gnnc refuses rather than differ."""
    g = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1], [1, 2]),
            ("user", "plays", "game"): ([0, 1], [0, 1]),
            ("user", "wishes", "game"): ([0, 2], [1, 0]),
        }
    )
    block = gnnc.to_block(g, {"game": torch.tensor([0, 1]), "user": torch.tensor([1, 2])})
    assert block["user", :, "user"].num_edges() == block.num_edges("follows")  # one relation: its view
    with pytest.raises(NotImplementedError, match="several relations of a block"):
        block[:, :, :]


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


def test_filter_nodes_and_edges_match_dgl():
    g = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1, 2, 3], [1, 2, 3, 0]),
            ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
        }
    )
    g.nodes["user"].data["h"] = torch.tensor([1.0, -2.0, 3.0, -4.0])
    g.edges["plays"].data["w"] = torch.tensor([0.5, -1.0, 2.0, -3.0])
    assert g.filter_nodes(lambda n: n.data["h"] > 0, ntype="user").tolist() == [0, 2]
    assert g.filter_nodes(lambda n: n.data["h"] > 0, [1, 2, 3], ntype="user").tolist() == [2]
    assert g.filter_edges(lambda e: e.data["w"] > 0, etype="plays").tolist() == [0, 2]
    assert g.filter_edges(lambda e: e.src["h"] > 0, [3, 2, 0], etype="plays").tolist() == [2, 0]
    pairs = (torch.tensor([1, 2]), torch.tensor([0, 1]))
    assert g.filter_edges(lambda e: e.data["w"] < 0, pairs, etype="plays").tolist() == [1]
    assert "_mask" not in g.nodes["user"].data and "_mask" not in g.edges["plays"].data


def _typed_udfs(seen):
    def message(edges):
        seen.append(edges.canonical_etype)
        return {"m": edges.src["h"] * (2 if edges.canonical_etype[1] == "plays" else 3)}

    def reduce(nodes):
        seen.append(nodes.ntype)
        return {"y": nodes.mailbox["m"].sum(1) + (1 if nodes.ntype == "game" else 0)}

    return message, reduce


def test_udfs_read_their_batch_types_and_compile_falls_back_for_them():
    g = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1, 2, 3], [1, 2, 3, 0]),
            ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
        }
    )
    g.nodes["user"].data["h"] = torch.tensor([1.0, -2.0, 3.0, -4.0])
    seen = []
    g.update_all(*_typed_udfs(seen), etype="plays")
    g.apply_nodes(lambda n: seen.append(n.ntype) or {}, ntype="user")
    assert seen == [("user", "plays", "game"), "game", "user"]
    assert g.nodes["game"].data["y"].tolist() == [-1.0, 3.0]
    eager = g.nodes["game"].data.pop("y")
    with pytest.warns(gnnc.FallbackWarning, match="could not compile"):  # the branch on a type is not traced
        g.update_all(*_typed_udfs([]), etype="plays", compile=True)
    assert g.nodes["game"].data["y"].equal(eager)
    with pytest.raises(AttributeError, match="2 relations"):  # gnnc's whole-graph call has no one relation
        g.apply_edges(lambda e: {"z": torch.zeros(len(e))} if e.canonical_etype else {})


def test_to_heterogeneous_takes_dgls_metagraph():
    g = gnnc.graph(([0, 1, 2, 0], [1, 2, 0, 2]))
    g.ndata["_TYPE"] = torch.tensor([0, 1, 0])
    g.edata["_TYPE"] = torch.tensor([0, 1, 0, 0])
    g.edata["e"] = torch.tensor([1.0, 2.0, 3.0, 4.0])
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


def test_to_heterogeneous_refuses_a_metagraph_when_names_repeat():
    """DGL reads a repeated relation name as its last type id and drops the other relation's edges, silently."""
    hg = gnnc.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0]), ("a", "r", "a"): ([0, 0], [0, 0])})
    back = gnnc.to_heterogeneous(gnnc.to_homogeneous(hg), hg.ntypes, hg.etypes)
    assert [back.num_edges(k) for k in back.canonical_etypes] == [2, 1, 1]
    with pytest.raises(ValueError, match=r"\['r'\] stand for several type ids"):
        gnnc.to_heterogeneous(gnnc.to_homogeneous(hg), hg.ntypes, hg.etypes, metagraph=hg.metagraph())


def test_to_homogeneous_combines_features_as_dgl():
    """DGL reads the features on the types with nodes: a type without nodes need not hold them, and one a
    later type lacks is dropped; two row shapes raise."""
    g = gnnc.heterograph({("A", "x", "B"): ([0, 1], [1, 0]), ("B", "y", "C"): ([], [])}, {"A": 2, "B": 2, "C": 0})
    g.nodes["A"].data["f"] = torch.tensor([1.0, 2.0])
    g.nodes["B"].data["f"] = torch.tensor([3.0, 4.0])
    g.nodes["A"].data["only"] = torch.tensor([5.0, 6.0])
    assert gnnc.to_homogeneous(g, ndata=["f"]).ndata["f"].tolist() == [1, 2, 3, 4]
    assert sorted(gnnc.to_homogeneous(g, ndata=["f", "only"]).ndata) == ["_ID", "_TYPE", "f"]
    g.nodes["B"].data["f"] = torch.tensor([[3.0], [4.0]])
    with pytest.raises(ValueError, match="Cannot concatenate column f"):
        gnnc.to_homogeneous(g, ndata=["f"])


def test_casts_touch_floating_features_of_a_copy():
    g = gnnc.heterograph({("u", "r", "u"): ([0], [1])})
    g.ndata["a"] = torch.ones(2, dtype=torch.float64)
    g.ndata["i"] = torch.ones(2, dtype=torch.int32)
    g.edata["b"] = torch.ones(1)
    half = to_half(g)
    assert (half.ndata["a"].dtype, half.ndata["i"].dtype, half.edata["b"].dtype) == (
        torch.float16,
        torch.int32,
        torch.float16,
    )
    assert g.ndata["a"].dtype == torch.float64


def test_formats_query_and_no_switch():
    g = gnnc.graph((np.array([0, 1, 0, 0, 2]), np.array([2, 2, 1, 1, 1])))  # numpy ids (not a csr form)
    assert g.formats() == {"created": ["coo"], "not created": ["csr", "csc"]}
    assert [t.tolist() for t in g.edges(order="srcdst")] == [[0, 0, 0, 1, 2], [1, 1, 2, 2, 1]]
    with pytest.raises(NotImplementedError, match="no sparse-format switch"):
        g.formats("csr")


def test_is_sorted_srcdst():
    assert dgl_utils.is_sorted_srcdst(torch.tensor([0, 0, 1, 1]), torch.tensor([2, 3, 0, 0])) == (True, True)
    assert dgl_utils.is_sorted_srcdst(torch.tensor([0, 0, 1, 1]), torch.tensor([3, 2, 0, 0])) == (True, False)
    assert dgl_utils.is_sorted_srcdst(torch.tensor([1, 0]), torch.tensor([0, 1])) == (False, False)


def test_alias_has_dgl_transforms_functional():
    from gnnc.compat import dgl as alias

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = alias._alias_modules()
    functional = modules["dgl.transforms.functional"]
    assert functional.to_half is to_half and modules["dgl.transforms"].functional is functional
