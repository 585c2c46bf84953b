"""A block's source and destination node features are two sides, as DGL's two frames (gnnc.graph.sided_store).

The numbers were checked against DGL 2.1 running the same code (``import dgl``): message passing reads
``edges.src`` from the source side and ``edges.dst`` / ``nodes.data`` from the destination side, and writes
its results to the destination side only; compiled calls match eager with a plan that ran.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gnnc
from gnnc import function as fn
from gnnc.compiler import driver as compiled
from gnnc.message_passing import compiling

NID = "_ID"


def _block():
    """DGL's ``to_block(in_subgraph(g, [0, 1]), [0, 1])``: 5 source nodes (parent ids 0, 1, 2, 4, 3), 2
    destination nodes, edges 2->0, 3->0, 0->1, 4->1 (block ids)."""
    g = gnnc.graph(([0, 1, 2, 3, 4], [1, 2, 0, 1, 0]))
    b = gnnc.to_block(gnnc.in_subgraph(g, torch.tensor([0, 1])), torch.tensor([0, 1]))
    b.srcdata["h"] = torch.arange(5.0).unsqueeze(1) + 1
    return b


def _flat(t):
    return t.flatten().tolist()


def test_update_all_into_a_source_feature_name_keeps_the_source_side():
    b = _block()
    b.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
    assert _flat(b.srcdata["h"]) == [1.0, 2.0, 3.0, 4.0, 5.0]  # DGL: the source side as written
    assert _flat(b.dstdata["h"]) == [7.0, 6.0]


def test_destination_side_may_hold_other_values_than_the_source_side():
    b = _block()
    b.dstdata["h"] = torch.tensor([[100.0], [200.0]])  # DGL's GraphSAGE / GAT on blocks write both sides
    assert _flat(b.srcdata["h"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    b.update_all(fn.copy_u("h", "m"), fn.mean("m", "neigh"))
    assert _flat(b.dstdata["neigh"]) == [3.5, 3.0] and _flat(b.dstdata["h"]) == [100.0, 200.0]


def _msg(edges):
    return {"m": edges.src["h"] * 2 + edges.dst["y"] + edges.dst["h"]}


def _red(nodes):
    return {"o": nodes.mailbox["m"].sum(1) + nodes.data["y"]}


def _upd(nodes):
    return {"u": nodes.data["o"] * 3 + nodes.data["h"]}


def _two_sided(b):
    b.dstdata["h"] = torch.tensor([[100.0], [200.0]])
    b.dstdata["y"] = torch.tensor([[10.0], [20.0]])
    return b


def test_udfs_read_each_side_and_the_update_runs_on_the_destination_nodes():
    b = _two_sided(_block())
    b.update_all(_msg, _red, _upd)
    assert _flat(b.dstdata["u"]) == [832.0, 1616.0]  # DGL 2.1
    assert sorted(b.srcdata) == [NID, "h"] and sorted(b.dstdata) == [NID, "h", "u", "y"]
    b.apply_edges(fn.u_add_v("h", "y", "e"))
    assert _flat(b.edata["e"]) == [13.0, 14.0, 21.0, 25.0]


def test_reduce_reads_the_destination_side_only():
    b = _block()
    b.dstdata["y"] = torch.tensor([[10.0], [20.0]])
    with pytest.raises(KeyError, match="'h'"):  # as DGL: 'h' is on the source side only
        b.update_all(fn.copy_u("h", "m"), lambda nodes: {"o": nodes.mailbox["m"].sum(1) + nodes.data["h"]})


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda b: b.pull(torch.tensor([1]), fn.copy_u("h", "m"), fn.sum("m", "p")), [0.0, 6.0]),
        (lambda b: b.send_and_recv(torch.tensor([0, 1]), fn.copy_u("h", "m"), fn.sum("m", "p")), [7.0, 0.0]),
        (lambda b: b.push(torch.tensor([2]), fn.copy_u("h", "m"), fn.sum("m", "p")), [3.0, 0.0]),
    ],
)
def test_partial_calls_write_the_destination_side(call, expected):
    b = _block()
    call(b)
    assert _flat(b.dstdata["p"]) == expected and "p" not in b.srcdata  # DGL 2.1


def test_to_block_gives_both_sides_the_parent_features():
    g = gnnc.graph(([0, 1, 2, 3, 4], [1, 2, 0, 1, 0]))
    g.ndata["f"] = torch.arange(5.0).unsqueeze(1)
    b = gnnc.to_block(gnnc.in_subgraph(g, torch.tensor([0, 1])), torch.tensor([0, 1]))
    assert sorted(b.srcdata) == sorted(b.dstdata) == [NID, "f"]
    assert _flat(b.srcdata["f"]) == [0.0, 1.0, 2.0, 4.0, 3.0] and _flat(b.dstdata["f"]) == [0.0, 1.0]


def test_local_scope_restores_both_sides():
    b = _block()
    with b.local_scope():
        b.dstdata["h"] = torch.zeros(2, 1)
        b.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert "s" not in b.dstdata and "h" not in b.dstdata and _flat(b.srcdata["h"]) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_ndata_is_one_node_set_over_both_sides():
    """gnnc's view for layers written for whole graphs (DGL has no ``ndata`` on a block)."""
    b = _block()
    b.ndata["x"] = torch.arange(5.0).unsqueeze(1)
    assert _flat(b.srcdata["x"]) == [0.0, 1.0, 2.0, 3.0, 4.0] and _flat(b.dstdata["x"]) == [0.0, 1.0]
    b.update_all(fn.copy_u("x", "m"), fn.sum("m", "x"))
    assert _flat(b.ndata["x"]) == [5.0, 4.0, 2.0, 3.0, 4.0]  # the destination rows are the results
    assert _flat(b.srcdata["x"]) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert _flat(b.slice_dst(b.ndata.pop("x"))) == [5.0, 4.0] and "x" not in b.srcdata and "x" not in b.dstdata


def _hetero_block():
    h = gnnc.heterograph(
        {("a", "r", "b"): ([0, 1, 2], [0, 0, 1]), ("b", "s", "a"): ([0, 1], [1, 2]), ("a", "t", "a"): ([0, 2], [1, 1])}
    )
    seeds = {"a": torch.tensor([1]), "b": torch.tensor([0])}
    hb = gnnc.to_block(gnnc.in_subgraph(h, seeds), seeds)
    hb.srcnodes["a"].data["x"] = torch.arange(hb.num_src_nodes("a") * 2.0).view(-1, 2) + 1
    hb.srcnodes["b"].data["x"] = torch.arange(hb.num_src_nodes("b") * 2.0).view(-1, 2) + 10
    hb.dstnodes["a"].data["x"] = torch.full((hb.num_dst_nodes("a"), 2), 100.0)
    hb.dstnodes["b"].data["x"] = torch.full((hb.num_dst_nodes("b"), 2), 200.0)
    hb.dstnodes["a"].data["z"] = torch.full((hb.num_dst_nodes("a"), 2), 100.0)
    return hb


_RELATIONS = {
    "r": (fn.copy_u("x", "m"), fn.sum("m", "y")),
    "s": (fn.copy_u("x", "m"), fn.sum("m", "y")),
    "t": (fn.u_add_v("x", "z", "m"), fn.max("m", "y")),
}


def _hetero_layer(hb):
    hb.multi_update_all(_RELATIONS, "sum")
    hb.apply_edges(fn.u_sub_v("x", "z", "d"), etype="t")
    return hb.dstnodes["a"].data["y"], hb.dstnodes["b"].data["y"], hb.edges["t"].data["d"]


def test_a_heterogeneous_block_keeps_each_types_sides():
    hb = _hetero_block()
    a, b, d = _hetero_layer(hb)
    assert a.tolist() == [[115.0, 117.0]] and b.tolist() == [[4.0, 6.0]]  # DGL 2.1
    assert d.tolist() == [[-97.0, -96.0], [-95.0, -94.0]]
    assert hb.srcnodes["a"].data["x"].tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]


# ------------------------------------------------------------------ compiled
def _compiled(run, *args):
    """``run(*args)`` with every message-passing call compiled; the plans that ran (a fallback is an error)."""
    with warnings.catch_warnings(), compiled.recording() as plans, compiling({}):
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = run(*args)
    assert plans and all(p.module is not None for p in plans), "no compiled plan ran"
    return out


def _one_type_layer(b):
    b.update_all(
        lambda e: {"m": e.src["h"] * 2 + e.dst["y"]},
        lambda n: {"o": n.mailbox["m"].sum(1) + n.data["y"]},
        lambda n: {"u": n.data["o"] * 3 + n.data["y"]},
    )
    b.update_all(fn.copy_u("h", "m"), fn.mean("m", "neigh"))
    b.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
    b.apply_edges(lambda e: {"e": e.src["h"] * e.dst["neigh"]})
    return b.dstdata["u"], b.dstdata["neigh"], b.dstdata["h"], b.srcdata["h"], b.edata["e"]


def test_compiled_calls_on_a_block_match_eager():
    want = _one_type_layer(_two_sided(_block()))
    assert [_flat(t) for t in want] == [
        [142.0, 236.0],
        [3.5, 3.0],
        [7.0, 6.0],
        [1.0, 2.0, 3.0, 4.0, 5.0],
        [10.5, 14.0, 3.0, 15.0],
    ]  # DGL 2.1
    got = _compiled(_one_type_layer, _two_sided(_block()))
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)


def test_compiled_calls_on_a_heterogeneous_block_match_eager():
    want = _hetero_layer(_hetero_block())
    got = _compiled(_hetero_layer, _hetero_block())
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)


def test_a_feature_read_on_both_sides_with_different_values_runs_eagerly():
    want = _two_sided(_block())
    want.update_all(_msg, _red, _upd)
    b = _two_sided(_block())
    with pytest.warns(gnnc.FallbackWarning, match="both sides of a block"), compiling({}):
        b.update_all(_msg, _red, _upd)
    torch.testing.assert_close(b.dstdata["u"], want.dstdata["u"])


def test_node_counts_and_ids_of_a_block_follow_dgl():
    # DGL 2.1 (checked): num_nodes() with no type counts both sides, a type's count and nodes(t) are its
    # source nodes, nodes() with no type is refused (ntypes lists '_N' twice)
    b = _block()
    assert b.ntypes == ["_N", "_N"] and (b.num_src_nodes(), b.num_dst_nodes()) == (5, 2)
    assert b.num_nodes() == b.number_of_nodes() == 7 and b.num_nodes("_N") == 5
    assert b.nodes("_N").tolist() == b.srcnodes().tolist() == [0, 1, 2, 3, 4] and b.dstnodes().tolist() == [0, 1]
    with pytest.raises(ValueError, match="name the node type"):
        b.nodes()
    g = gnnc.heterograph({("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "plays", "game"): ([0, 1], [0, 1])})
    hb = gnnc.to_block(g, {"game": torch.tensor([0, 1]), "user": torch.tensor([1, 2])})
    assert [(hb.num_src_nodes(t), hb.num_dst_nodes(t), hb.num_nodes(t)) for t in ("game", "user")] == [
        (2, 2, 2),
        (3, 2, 3),
    ]
    assert (hb.num_nodes(), hb.num_src_nodes(), hb.num_dst_nodes()) == (9, 5, 4)
    assert hb.nodes("user").tolist() == [0, 1, 2]
