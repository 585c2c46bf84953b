"""DGL 2.1's subgraph extraction and ``to_block`` (gnnc.graph.subgraph), checked against DGL's documented results
and orders; message passing on a block writes the destination rows, eager and compiled."""

import warnings

import pytest
import torch

import gnnc
import gnnc.function as fn
from gnnc.compiler import driver as compiled

NID = EID = "_ID"


def cycle():
    return gnnc.graph(([0, 1, 2, 3, 4], [1, 2, 3, 4, 0]))


def test_node_subgraph_keeps_the_given_order_and_gathers_features():
    g = cycle()
    g.ndata["x"] = torch.arange(10).view(5, 2)
    sg = gnnc.node_subgraph(g, [0, 1, 4])
    assert [t.tolist() for t in sg.edges()] == [[0, 2], [1, 0]]
    assert sg.ndata[NID].tolist() == [0, 1, 4] and sg.edata[EID].tolist() == [0, 4]
    assert sg.ndata["x"].tolist() == [[0, 1], [2, 3], [8, 9]]
    assert g.subgraph(torch.tensor([True, True, False, False, True])).ndata[NID].tolist() == [0, 1, 4]
    sg.ndata["x"] = torch.zeros(3, 2, dtype=torch.int64)  # the subgraph's features are its own
    assert g.ndata["x"].sum() == 45


def test_node_subgraph_edges_by_source_in_given_order():
    """DGL slices the CSR: a relation's edges by source in the order the nodes are given, then by edge id."""
    g = gnnc.graph(([0, 2, 0, 4, 2], [1, 1, 2, 3, 4]))
    sg = gnnc.node_subgraph(g, [2, 0, 1, 4])
    assert sg.edata[EID].tolist() == [1, 4, 0, 2]
    whole = gnnc.node_subgraph(g, [2, 0, 1, 4], relabel_nodes=False)
    assert whole.num_nodes() == 5 and NID not in whole.ndata and whole.edata[EID].tolist() == [1, 4, 0, 2]


def test_edge_subgraph_numbers_nodes_by_first_appearance():
    g = cycle()
    sg = g.edge_subgraph([0, 4])
    assert sg.ndata[NID].tolist() == [0, 4, 1]
    assert [t.tolist() for t in sg.edges()] == [[0, 1], [2, 0]]
    kept = gnnc.edge_subgraph(g, [0, 4], relabel_nodes=False)
    assert kept.num_nodes() == 5 and [t.tolist() for t in kept.edges()] == [[0, 4], [1, 0]]


def test_heterograph_subgraphs_take_dicts_and_keep_every_type():
    g = gnnc.heterograph(
        {("user", "plays", "game"): ([0, 1, 1, 2], [0, 0, 2, 1]), ("user", "follows", "user"): ([0, 1, 1], [1, 2, 2])},
        idtype=torch.int32,
    )
    g.edges["plays"].data["w"] = torch.arange(4.0)
    sg = gnnc.node_subgraph(g, {"user": [1, 2]})
    assert sg.num_nodes("game") == 0 and sg.num_edges("follows") == 2 and sg.idtype == torch.int32
    assert sg.nodes["user"].data[NID].dtype == torch.int32
    eg = g.edge_subgraph({("user", "follows", "user"): [1, 2], "plays": [2]})
    assert eg.num_nodes("game") == 1 and eg.num_nodes("user") == 2
    assert eg.edges["plays"].data["w"].tolist() == [2.0]


def test_in_and_out_subgraph_group_edges_by_the_given_nodes():
    g = cycle()
    g.edata["w"] = torch.arange(10).view(5, 2)
    sg = gnnc.out_subgraph(g, [2, 0])
    assert [t.tolist() for t in sg.edges()] == [[2, 0], [3, 1]] and sg.edata[EID].tolist() == [2, 0]
    assert sg.num_nodes() == 5 and NID not in sg.ndata and sg.edata["w"].tolist() == [[4, 5], [0, 1]]
    ig = g.in_subgraph([3, 1], relabel_nodes=True, store_ids=False)
    assert EID not in ig.edata and ig.num_nodes() == 4


def test_khop_subgraphs_return_the_seeds_new_ids():
    g = gnnc.graph(([1, 1, 2, 3, 4], [0, 2, 0, 4, 2]))
    sg, inv = gnnc.khop_in_subgraph(g, 0, k=2)
    assert sg.edata[EID].tolist() == [0, 1, 2, 4] and inv.tolist() == [0]
    g = gnnc.graph(([0, 2, 0, 4, 2], [1, 1, 2, 3, 4]))
    sg, inv = g.khop_out_subgraph(0, k=2)
    assert sg.edata[EID].tolist() == [0, 2, 1, 4] and inv.tolist() == [0]
    assert gnnc.khop_out_subgraph(g, 1, k=2, relabel_nodes=False).num_edges() == 0


def test_subgraph_of_a_relation_slice_has_the_slice_types():
    g = gnnc.heterograph({("user", "plays", "game"): ([0, 1], [0, 1]), ("user", "follows", "user"): ([0], [1])})
    sg = g["plays"].edge_subgraph([1])
    assert sg.ntypes == ["user", "game"] and sg.edges["plays"].data[EID].tolist() == [1]
    assert g.edge_type_subgraph(["follows"]).ntypes == ["user"]


def test_to_block_puts_the_destination_nodes_first():
    g = gnnc.graph(([1, 2], [2, 3]))
    g.ndata["x"] = torch.arange(4.0)
    block = gnnc.to_block(g, torch.tensor([3, 2]))
    assert block.is_block and block.num_src_nodes() == 3 and block.num_dst_nodes() == 2
    assert block.srcdata[NID].tolist() == [3, 2, 1] and block.dstdata[NID].tolist() == [3, 2]
    assert block.edata[EID].tolist() == [0, 1] and block.srcdata["x"].tolist() == [3.0, 2.0, 1.0]
    src, dst = block.edges(order="eid")
    assert block.srcdata[NID][src].tolist() == [1, 2] and block.dstdata[NID][dst].tolist() == [2, 3]
    with pytest.raises(ValueError, match="not among dst_nodes"):
        gnnc.to_block(g, torch.tensor([2]))


def test_to_block_on_a_heterograph_counts_each_side():
    g = gnnc.heterograph({("A", "_E", "B"): ([1, 2], [2, 3])})
    block = gnnc.to_block(g, {"B": torch.tensor([3, 2])})
    assert block.num_nodes("DST/A") == 0 and block.num_nodes("SRC/A") == 2 and block.num_dst_nodes("B") == 2
    assert block.dstnodes["B"].data[NID].tolist() == [3, 2] and block.srcnodes["B"].data[NID].tolist() == [3, 2]
    assert block["_E"].dstdata[NID].tolist() == [3, 2]


def test_a_blocks_ntypes_list_the_source_then_the_destination_types_as_dgl():
    """DGL's DGLBlock.ntypes (DGL's nn tests read ``len(g.ntypes) == 2`` as "feed a (src, dst) pair")."""
    block = gnnc.to_block(gnnc.graph(([2, 3, 4], [5, 6, 7]), num_nodes=100))
    assert block.ntypes == ["_N", "_N"] and block.srctypes == ["_N"] and block.dsttypes == ["_N"]
    hetero = gnnc.to_block(gnnc.heterograph({("user", "plays", "game"): ([0, 1], [1, 0])}), {"game": [0, 1]})
    assert hetero.ntypes == ["game", "user", "game", "user"]
    assert hetero.num_src_nodes("user") == 2 and hetero.num_dst_nodes("game") == 2  # the types, named once


def _block_layer(block, h):
    block.srcdata["h"] = h
    block.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"))
    block.update_all(lambda edges: {"m": edges.src["h"] * 2}, lambda nodes: {"u": nodes.mailbox["m"].max(1)[0]})
    return block.dstdata["s"] + block.dstdata["u"]


def test_message_passing_on_a_block_writes_the_destination_rows_eager_and_compiled():
    g = gnnc.graph(([0, 1, 2, 3, 3], [2, 2, 3, 1, 2]))
    block = gnnc.to_block(g, torch.tensor([2, 3, 1]))
    h = torch.randn(block.num_src_nodes(), 3)
    out = _block_layer(block, h)
    nid = block.srcdata[NID].tolist()
    src, dst = block.edges()
    expected = torch.zeros(3, 3)
    for v in range(3):
        into = src[dst == v]
        expected[v] = h[into].sum(0) + (h[into] * 2).max(0)[0]
    torch.testing.assert_close(out, expected)
    assert nid[:3] == [2, 3, 1]

    model = gnnc.compile(_BlockModule())
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = model(block, h)
    assert plans, "no compiled plan ran"
    torch.testing.assert_close(got, expected)


class _BlockModule(torch.nn.Module):
    def forward(self, block, h):
        return _block_layer(block, h)
