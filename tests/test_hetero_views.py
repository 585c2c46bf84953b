"""DGL's feature views on graphs with several node or edge types (issue 40, DECISIONS "45: Heterograph
feature reads follow DGL globally"), and gnnc's concatenated views ``ndata_all`` / ``edata_all``.

The expected numbers, keys and dicts are DGL 2.1's, printed by the same programs run with ``import dgl``.
"""

import warnings

import pytest
import torch

import gnnc
from gnnc.compiler.driver import recording

GAME = ("user", "plays", "game"), ("developer", "develops", "game")


def _graph():
    return gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1], [1, 2]),
            ("user", "plays", "game"): ([0, 1, 2], [0, 0, 1]),
            ("developer", "develops", "game"): ([0, 1], [0, 1]),
        }
    )


def _lists(by_type: dict) -> dict:
    return {k: v.flatten().tolist() for k, v in by_type.items()}


def _copy_src(edges):
    return {"m": edges.src["h"]}


def _sum_mailbox(nodes):
    return {"s": nodes.mailbox["m"].sum(1)}


def _add_ends(edges):
    return {"e": edges.src["h"] + edges.dst["h"]}


@pytest.mark.parametrize("compile_", [False, True])
def test_ndata_and_edata_read_by_type_after_message_passing(compile_):
    g = _graph()
    g.ndata["h"] = {"user": torch.arange(3.0).unsqueeze(1), "developer": torch.tensor([[10.0], [20.0]])}
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        g.multi_update_all({rel: (_copy_src, _sum_mailbox) for rel in GAME}, "sum", compile=compile_)
        g.apply_edges(_add_ends, etype="follows", compile=compile_)
    assert bool(plans) == compile_ and all(plan.module is not None for plan in plans)
    assert _lists(g.ndata["h"]) == {"developer": [10.0, 20.0], "user": [0.0, 1.0, 2.0]}
    assert _lists(g.ndata["s"]) == {"game": [11.0, 22.0]}
    assert _lists(g.edata["e"]) == {("user", "follows", "user"): [1.0, 3.0]}
    assert (sorted(g.ndata.keys()), sorted(g.edata.keys()), len(g.ndata), len(g.edata)) == (["h", "s"], ["e"], 2, 1)


def test_absent_names_writes_and_deletes_follow_dgl():
    g = _graph()
    g.ndata["h"] = {"user": torch.arange(3.0).unsqueeze(1), "developer": torch.tensor([[10.0], [20.0]])}
    g.nodes["game"].data["s"] = torch.tensor([[11.0], [22.0]])
    assert g.ndata["nope"] == {} and "nope" in g.ndata and g.edata.pop("nope") == {}  # DGL's, absent or not
    assert g.srcdata["nope"] == {} and g.ndata.get("nope", 0) == {}
    g.edata["w"] = {"plays": torch.ones(3), ("developer", "develops", "game"): torch.full((2,), 2.0)}
    assert _lists(g.edata["w"]) == {("developer", "develops", "game"): [2.0, 2.0], ("user", "plays", "game"): [1.0] * 3}
    del g.ndata["h"]
    assert sorted(g.ndata) == ["s"] and list(g.nodes["user"].data) == [] and list(g.nodes["developer"].data) == []
    assert _lists(g.ndata.pop("s")) == {"game": [11.0, 22.0]} and list(g.ndata) == []
    with pytest.raises(TypeError, match="spans several types.*ndata_all"):
        g.ndata["y"] = torch.zeros(7)
    with pytest.raises(TypeError, match="spans several types.*edata_all"):
        g.edata["y"] = torch.zeros(7)
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        g.ndata["y"] = {"nope": torch.zeros(1)}


def test_one_node_type_reads_tensors_and_refuses_dicts_several_relations_read_dicts():
    g = gnnc.heterograph({("a", "r", "a"): ([0, 1], [1, 2]), ("a", "s", "a"): ([0], [1])})
    g.ndata["h"] = torch.ones(3)
    assert torch.equal(g.ndata["h"], torch.ones(3))
    with pytest.raises(TypeError, match="one node type"):
        g.ndata["q"] = {"a": torch.ones(3)}
    assert g.edata["nope"] == {}
    g.edata["e"] = {("a", "r", "a"): torch.ones(2)}
    assert _lists(g.edata["e"]) == {("a", "r", "a"): [1.0, 1.0]}
    one = gnnc.heterograph({("a", "r", "b"): ([0, 1], [1, 2])})
    one.edata["w"] = torch.ones(2)
    assert torch.equal(one.edata["w"], torch.ones(2))
    with pytest.raises(TypeError, match="one edge type"):
        one.edata["w"] = {("a", "r", "b"): torch.ones(2)}


def test_ndata_all_and_edata_all_concatenate_types_in_order():
    g = _graph()  # node types developer (2), game (2), user (3); relations develops, follows, plays
    g.ndata["h"] = {
        "developer": torch.tensor([1.0, 2.0]),
        "game": torch.tensor([3.0, 4.0]),
        "user": torch.tensor([5.0, 6.0, 7.0]),
    }
    assert g.ndata_all["h"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    g.ndata_all["z"] = torch.arange(7.0)
    assert _lists(g.ndata["z"]) == {"developer": [0.0, 1.0], "game": [2.0, 3.0], "user": [4.0, 5.0, 6.0]}
    g.edata_all["w"] = torch.arange(7.0)
    assert _lists(g.edata["w"]) == {
        ("developer", "develops", "game"): [0.0, 1.0],
        ("user", "follows", "user"): [2.0, 3.0],
        ("user", "plays", "game"): [4.0, 5.0, 6.0],
    }
    g.nodes["user"].data["u"] = torch.ones(3)
    with pytest.raises(KeyError, match=r"read it per type: g.ndata\['u'\] gives \{type: tensor\}"):
        g.ndata_all["u"]


def test_bipartite_srcdata_is_a_dict_of_the_source_types():
    b = gnnc.heterograph({("user", "plays", "game"): ([0, 1], [0, 0]), ("developer", "develops", "game"): ([0], [1])})
    b.srcdata["x"] = {"user": torch.ones(2, 1), "developer": torch.full((1, 1), 3.0)}
    b.update_all(gnnc.function.copy_u("x", "m"), gnnc.function.sum("m", "y"), etype="plays")
    b.update_all(gnnc.function.copy_u("x", "m"), gnnc.function.sum("m", "y2"), etype="develops")
    assert b.dstdata["y"].flatten().tolist() == [2.0, 0.0] and b.dstdata["y2"].flatten().tolist() == [0.0, 3.0]
    assert (sorted(b.srcdata.keys()), sorted(b.dstdata.keys())) == (["x"], ["y", "y2"])
    assert sorted(_lists(b.srcdata["x"]).items()) == [("developer", [3.0]), ("user", [1.0, 1.0])]
    assert b.srcdata["y"] == {} and b.srcdata.pop("y") == {}  # DGL's, where gnnc raised KeyError
