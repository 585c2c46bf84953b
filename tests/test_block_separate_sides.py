"""Blocks whose source and destination sides are separate node sets, and DGL's sides of uni-bipartite graphs
and relation slices (gnnc.graph.blocks, gnnc.graph.block).

Every number was checked against DGL 2.1 running the same code (``import dgl``): ``create_block``,
``to_block(include_dst_in_src=False)``, ``block_to_graph``, degrees over DGL's side, ``"SRC/t"`` names.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gnnc
from gnnc import function as fn
from gnnc.compiler import driver as compiled
from gnnc.graph.blocks import block_to_graph, create_block
from gnnc.message_passing import compiling

NID, EID = "_ID", "_ID"


def _hetero():
    g = gnnc.heterograph(
        {
            ("A", "AA", "A"): ([0, 2, 1, 3], [1, 3, 2, 4]),
            ("A", "AB", "B"): ([0, 1, 3, 1], [1, 3, 5, 6]),
            ("B", "BA", "A"): ([2, 3], [3, 2]),
        }
    )
    g.nodes["A"].data["x"] = torch.arange(5.0).unsqueeze(1)
    g.nodes["B"].data["x"] = torch.arange(7.0).unsqueeze(1) * 10
    return g


def test_to_block_without_destinations_in_sources():
    g = _hetero()
    bg = gnnc.to_block(g["AA"], include_dst_in_src=False)
    assert bg.srcdata[NID].tolist() == [0, 2, 1, 3] and bg.dstdata[NID].tolist() == [1, 2, 3, 4]
    assert [t.tolist() for t in bg.edges()] == [[0, 1, 2, 3], [0, 2, 1, 3]]
    assert bg.num_src_nodes() == 4 and bg.num_dst_nodes() == 4 and bg.is_unibipartite


def test_heterogeneous_to_block_without_destinations_in_sources():
    g = _hetero()
    dst = {"A": torch.tensor([4, 3, 2, 1]), "B": torch.tensor([3, 5, 6, 1])}
    bg = gnnc.to_block(g, dst, include_dst_in_src=False)
    assert bg.srcnodes["A"].data[NID].tolist() == [0, 2, 1, 3] and bg.srcnodes["B"].data[NID].tolist() == [2, 3]
    assert bg.dstnodes["B"].data[NID].tolist() == [3, 5, 6, 1]
    assert bg.num_nodes("SRC/B") == 2 and bg.num_nodes("DST/B") == 4
    assert [t.tolist() for t in bg.edges(etype="AA")] == [[0, 1, 2, 3], [3, 1, 2, 0]]
    assert [t.tolist() for t in bg.edges(etype="AB")] == [[0, 2, 3, 2], [3, 0, 1, 2]]
    assert [t.tolist() for t in bg.edges(etype="BA")] == [[0, 1], [1, 2]]
    assert bg.in_degrees(etype="AB").tolist() == [1, 1, 1, 1] and bg.out_degrees(etype="AB").tolist() == [1, 0, 2, 1]
    assert bg.in_degrees(etype="BA").tolist() == [0, 1, 1, 0] and bg.out_degrees(etype="BA").tolist() == [1, 1]
    assert bg.srcnodes["B"].data["x"].flatten().tolist() == [20.0, 30.0]  # the parent's rows of each side
    assert bg.dstnodes["B"].data["x"].flatten().tolist() == [30.0, 50.0, 60.0, 10.0]


def test_create_block_counts_degrees_and_casts():
    b = create_block(([0, 1, 2], [1, 2, 3]))
    assert (b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) == (3, 4, 3)
    assert b.in_degrees().tolist() == [0, 1, 1, 1] and b.out_degrees().tolist() == [1, 1, 1]
    b.srcdata["x"] = torch.ones(3, 1)
    for other in (b.int(), b.to("cpu"), b.int().long()):
        assert other.is_block and other.num_dst_nodes() == 4 and other.srcdata["x"].shape == (3, 1)
    assert b.int().idtype == torch.int32 and b.int().to("cpu").idtype == torch.int32
    empty = create_block(([], []), 3, 4)
    assert (empty.num_src_nodes(), empty.num_dst_nodes(), empty.num_edges()) == (3, 4, 0)
    with pytest.raises(ValueError):
        create_block(([0, 5], [1, 2]), 4, 3)


def test_heterogeneous_create_block_and_its_relation_slices():
    b = create_block({("A", "AB", "B"): ([1, 2, 3], [2, 1, 0]), ("B", "BA", "A"): ([2, 3], [3, 4])})
    assert [b.num_src_nodes(t) for t in "AB"] == [4, 4] and [b.num_dst_nodes(t) for t in "AB"] == [5, 3]
    ab = b["AB"]
    assert ab.is_block and ab.number_of_dst_nodes() == 3 and ab.number_of_src_nodes() == 4
    assert ab.in_degrees().tolist() == [1, 1, 1] and ab.out_degrees().tolist() == [0, 1, 1, 1]


def test_block_to_graph_holds_the_blocks_tensors():
    b = create_block(
        {("A", "AB", "B"): ([], []), ("B", "BA", "A"): ([], [])},
        num_src_nodes={"A": 5, "B": 5},
        num_dst_nodes={"A": 6, "B": 4},
    )
    sax, dbx, ex = torch.randn(5, 3), torch.randn(4, 6), torch.randn(0, 2)
    b.srcnodes["A"].data["x"], b.dstnodes["B"].data["x"], b.edges["AB"].data["x"] = sax, dbx, ex
    hg = block_to_graph(b)
    assert [hg.num_nodes(t) for t in ("A_src", "B_src", "A_dst", "B_dst")] == [5, 5, 6, 4]
    assert hg.nodes["A_src"].data["x"] is sax and hg.nodes["B_dst"].data["x"] is dbx
    assert hg.edges["AB"].data["x"] is ex
    one = create_block(([0, 1, 2], [1, 2, 3]), 4, 5)
    sx, dx = torch.randn(4, 5), torch.randn(5, 6)
    one.srcdata["x"], one.dstdata["x"] = sx, dx
    g = block_to_graph(one)
    assert g.srcdata["x"] is sx and g.dstdata["x"] is dx and g.num_src_nodes() == 4 and g.num_dst_nodes() == 5


def test_uni_bipartite_side_names_and_degrees():
    g = gnnc.heterograph({("A", "AB", "B"): ([0, 0, 1], [1, 2, 5])})
    g.srcdata["h"] = torch.randn(2, 5)
    assert torch.equal(g.nodes["SRC/A"].data["h"], g.srcdata["h"]) and g.num_nodes("SRC/A") == 2
    assert g.in_degrees().tolist() == [0, 1, 1, 0, 0, 1] and g.out_degrees().tolist() == [2, 1]
    with pytest.raises(KeyError):
        g.num_nodes("DST/A")
    plays = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 0, 2, 1], [1, 2, 1, 3]),
            ("user", "plays", "game"): ([0, 0, 0, 1, 2], [0, 2, 3, 0, 2]),
        }
    )["plays"]
    assert not plays.is_block and plays.number_of_dst_nodes() == 4 and plays.num_src_nodes("user") == 4
    assert plays.in_degrees().tolist() == [2, 0, 2, 1] and plays.out_degrees().tolist() == [3, 1, 1, 0]


# ------------------------------------------------------------------ message passing
def _layer(b):
    b.update_all(fn.copy_u("x", "m"), fn.sum("m", "y"))
    b.apply_edges(lambda e: {"d": e.src["x"] - e.dst["z"]})
    return b.dstdata["y"].flatten().tolist(), b.edata["d"].flatten().tolist(), b.srcdata["x"].flatten().tolist()


def _created():
    b = create_block(([0, 1, 2, 3, 1], [0, 1, 1, 2, 0]), 4, 3)
    b.srcdata["x"] = torch.tensor([[1.0], [2.0], [4.0], [8.0]])
    b.dstdata["z"] = torch.tensor([[100.0], [200.0], [300.0]])
    return b


def test_message_passing_on_a_created_block_matches_dgl_eager_and_compiled():
    want = ([3.0, 6.0, 8.0], [-99.0, -198.0, -196.0, -292.0, -98.0], [1.0, 2.0, 4.0, 8.0])  # DGL 2.1
    assert _layer(_created()) == want
    with warnings.catch_warnings(), compiled.recording() as plans, compiling({}):
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = _layer(_created())
    assert plans and all(p.module is not None for p in plans), "no compiled plan ran"
    assert got == want


def test_message_passing_on_a_to_block_without_destinations_in_sources():
    g = gnnc.graph(([1, 2, 0], [2, 3, 3]))
    g.ndata["h"] = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    bg = gnnc.to_block(g, torch.tensor([3, 2]), include_dst_in_src=False)
    assert bg.srcdata["h"].flatten().tolist() == [2.0, 3.0, 1.0] and bg.dstdata["h"].flatten().tolist() == [4.0, 3.0]
    bg.update_all(fn.copy_u("h", "m"), fn.sum("m", "y"))
    assert bg.dstdata["y"].flatten().tolist() == [4.0, 2.0]  # DGL 2.1


def _short():
    """A block with fewer source (3) than destination (4) nodes."""
    b = create_block(([0, 1, 2, 0], [1, 2, 3, 3]))
    b.srcdata["x"] = torch.tensor([[1.0], [2.0], [4.0]])
    b.dstdata["z"] = torch.tensor([[10.0], [20.0], [30.0], [40.0]])
    return b


def _short_layer(b):
    b.update_all(fn.copy_u("x", "m"), fn.sum("m", "y"))
    b.update_all(lambda e: {"m": e.src["x"] * e.dst["z"]}, lambda n: {"w": n.mailbox["m"].max(1)[0] + n.data["z"]})
    b.apply_edges(fn.u_add_v("x", "z", "e"))
    return [b.dstdata["y"].flatten().tolist(), b.dstdata["w"].flatten().tolist(), b.edata["e"].flatten().tolist()]


def _short_hetero_layer():
    h = create_block(
        {("A", "AB", "B"): ([0, 1], [2, 0]), ("B", "BA", "A"): ([0, 0, 1], [3, 1, 0])},
        num_src_nodes={"A": 2, "B": 2},
        num_dst_nodes={"A": 4, "B": 3},
    )
    h.srcnodes["A"].data["x"], h.srcnodes["B"].data["x"] = torch.tensor([[1.0], [2.0]]), torch.tensor([[10.0], [20.0]])
    h.multi_update_all(
        {"AB": (fn.copy_u("x", "m"), fn.sum("m", "y")), "BA": (fn.copy_u("x", "m"), fn.sum("m", "y"))}, "sum"
    )
    return [h.dstnodes["A"].data["y"].flatten().tolist(), h.dstnodes["B"].data["y"].flatten().tolist()]


_SHORT = [[0.0, 1.0, 2.0, 5.0], [0.0, 40.0, 90.0, 200.0], [21.0, 32.0, 44.0, 41.0]]  # DGL 2.1
_SHORT_HETERO = [[20.0, 10.0, 0.0, 10.0], [2.0, 0.0, 1.0]]


def test_message_passing_with_fewer_sources_than_destinations_matches_dgl():
    b = _short()
    assert _short_layer(b) == _SHORT
    b.send_and_recv(torch.tensor([1, 3]), fn.copy_u("x", "m"), fn.sum("m", "s"))
    b.pull(torch.tensor([3]), fn.copy_u("x", "m"), fn.sum("m", "p"))
    assert b.dstdata["s"].flatten().tolist() == [0.0, 0.0, 2.0, 1.0]  # DGL 2.1
    assert b.dstdata["p"].flatten().tolist() == [0.0, 0.0, 0.0, 5.0]
    assert b.srcdata["x"].flatten().tolist() == [1.0, 2.0, 4.0]
    assert _short_hetero_layer() == _SHORT_HETERO


def test_compiled_message_passing_with_fewer_sources_than_destinations():
    with warnings.catch_warnings(), compiled.recording() as plans, compiling({}):
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = _short_layer(_short()), _short_hetero_layer()
    assert plans and all(p.module is not None for p in plans), "no compiled plan ran"
    assert got == (_SHORT, _SHORT_HETERO)


def test_one_node_set_writes_are_refused_where_the_sides_differ_in_size():
    b = _short()
    with pytest.raises(ValueError, match="write srcdata and dstdata"):
        b.ndata["h"] = torch.zeros(4, 1)
