"""Type order is DGL's: node types sorted by name, relations by canonical triple, whatever order the dicts
give (issue 40). Every expected value below is what DGL 2.1 gives for the same program."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import gnnc
from gnnc.compiler.driver import recording
from gnnc.data import load_dgl_graphs
from gnnc.data.dgl_files import write_dgl_graphs
from gnnc.data.neighbor_sampler import NeighborSampler
from gnnc.distributed.metagraph import typed_subgraph
from gnnc.graph import Graph
from gnnc.graph.homogeneous import EID, ETYPE, NID, NTYPE

# given in neither sorted order, nor num_nodes in the relations' order
DATA = {
    ("user", "plays", "game"): ([0, 1, 2], [0, 0, 1]),
    ("user", "follows", "user"): ([0, 1], [1, 2]),
    ("developer", "develops", "game"): ([0, 1], [1, 1]),
    ("game", "attracts", "user"): ([1], [2]),
}
NUM_NODES = {"user": 3, "game": 2, "developer": 2}
WEIGHT = {"plays": 1.0, "follows": 2.0, "develops": 3.0, "attracts": 4.0}


def unsorted_graph():
    g = gnnc.heterograph({k: (torch.tensor(s), torch.tensor(d)) for k, (s, d) in DATA.items()}, num_nodes=NUM_NODES)
    for t in g.ntypes:  # a node's value names its type id and its id
        g.nodes[t].data["x"] = torch.arange(g.num_nodes(t), dtype=torch.float32).unsqueeze(1) + 10 * g.ntype_id(t) + 1
    return g


def test_types_and_type_ids_are_in_dgl_order():
    g = unsorted_graph()
    assert g.ntypes == ["developer", "game", "user"]
    assert g.canonical_etypes == [
        ("developer", "develops", "game"),
        ("game", "attracts", "user"),
        ("user", "follows", "user"),
        ("user", "plays", "game"),
    ]
    assert g.etypes == ["develops", "attracts", "follows", "plays"]
    assert [g.ntype_id(t) for t in ("user", "game", "developer")] == [2, 1, 0]
    assert [g.etype_id(e) for e in ("plays", "follows", "develops", "attracts")] == [3, 2, 0, 1]
    assert [t.tolist() for t in g.find_edges("plays")] == [[0, 1, 2], [0, 0, 1]]  # edges keep the user's order


def test_num_nodes_order_and_relation_order_do_not_matter():
    g = gnnc.heterograph(
        {
            ("b", "x", "a"): ([0], [0]),
            ("a", "y", "b"): ([0], [0]),
            ("a", "x", "b"): ([0], [0]),
            ("a", "a", "a"): ([0], [0]),
        },
        num_nodes={"b": 3, "a": 2},
    )
    assert g.ntypes == ["a", "b"] and (g.num_nodes("a"), g.num_nodes("b")) == (2, 3)
    assert g.canonical_etypes == [("a", "a", "a"), ("a", "x", "b"), ("a", "y", "b"), ("b", "x", "a")]
    # sorted by the whole triple, not by relation name
    g = gnnc.heterograph({("z", "a", "z"): ([0], [0]), ("a", "b", "a"): ([0], [0])})
    assert g.ntypes == ["a", "z"] and g.canonical_etypes == [("a", "b", "a"), ("z", "a", "z")]


def test_unibipartite_sides_are_sorted():
    g = gnnc.heterograph({("u", "r", "g"): ([0], [0]), ("a", "s", "b"): ([0], [0])})
    assert g.is_unibipartite and g.ntypes == ["a", "b", "g", "u"]
    assert g.srctypes == ["a", "u"] and g.dsttypes == ["b", "g"]


def test_to_homogeneous_numbers_types_in_dgl_order():
    h = gnnc.to_homogeneous(unsorted_graph(), ndata=["x"])
    assert h.ndata[NTYPE].tolist() == [0, 0, 1, 1, 2, 2, 2]
    assert h.ndata[NID].tolist() == [0, 1, 0, 1, 0, 1, 2]
    assert h.edata[ETYPE].tolist() == [0, 0, 1, 2, 2, 3, 3, 3]
    assert h.edata[EID].tolist() == [0, 1, 0, 0, 1, 0, 1, 2]
    assert [t.tolist() for t in h.edges()] == [[0, 1, 3, 4, 5, 4, 5, 6], [3, 3, 6, 5, 6, 2, 2, 3]]
    assert h.ndata["x"].flatten().tolist() == [1.0, 2.0, 11.0, 12.0, 21.0, 22.0, 23.0]


class StackedRelations(nn.Module):
    """Per-relation UDFs whose results ``multi_update_all`` stacks in relation-id order."""

    def forward(self, g):
        with g.local_scope():
            funcs = {
                e: (
                    lambda edges, w=WEIGHT[e]: {"m": edges.src["x"] * w},
                    lambda nodes: {"z": nodes.mailbox["m"].sum(1)},
                )
                for e in g.etypes
            }
            g.multi_update_all(funcs, "stack")
            return g.nodes["game"].data["z"].squeeze(-1), g.nodes["user"].data["z"].squeeze(-1)


class WeightByTypeId(nn.Module):
    """A homogeneous graph's messages scaled by a table indexed by ``ETYPE``, as code numbering types does."""

    def forward(self, h):
        table = torch.tensor([1.0, 2.0, 3.0, 4.0])
        with h.local_scope():
            h.update_all(
                lambda e: {"m": e.src["x"] * table[e.data[ETYPE]].unsqueeze(1)}, lambda n: {"y": n.mailbox["m"].sum(1)}
            )
            return h.ndata["y"].squeeze(-1)


def run(module, graph, mode):
    if mode == "eager":
        return module(graph)
    compiled = gnnc.compile(module)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = compiled(graph)
    assert plans and all(plan.dfg is not None for plan in plans)
    return out


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_multi_update_all_stacks_relations_in_dgl_order(mode):
    game, user = run(StackedRelations(), unsorted_graph(), mode)
    assert game.tolist() == [[0.0, 43.0], [9.0, 23.0]]  # develops, then plays
    assert user.tolist() == [[0.0, 0.0], [0.0, 42.0], [48.0, 44.0]]  # attracts, then follows


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_type_ids_of_to_homogeneous_index_a_table_as_dgl(mode):
    h = gnnc.to_homogeneous(unsorted_graph(), ndata=["x"])
    assert run(WeightByTypeId(), h, mode).tolist() == [0.0, 0.0, 172.0, 95.0, 0.0, 63.0, 90.0]


def test_dgl_file_written_in_another_type_order_loads_by_name(tmp_path):
    """A file lists its types by name in the order it was written (gnnc wrote the dict's order before)."""
    relations = [
        (("user", "follows", "user"), torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])),
        (("user", "buys", "item"), torch.tensor([2, 0]), torch.tensor([1, 0])),
    ]
    old = Graph._build(["user", "item"], [3, 2], relations, "cpu")
    old.nodes["user"].data["h"] = torch.tensor([1.0, 2.0, 3.0])
    old.edges["buys"].data["w"] = torch.tensor([5.0, 6.0])
    write_dgl_graphs(tmp_path / "old.bin", [old])
    (g,), _ = load_dgl_graphs(tmp_path / "old.bin")
    assert g.ntypes == ["item", "user"] and g.etypes == ["buys", "follows"]
    assert [t.tolist() for t in g.find_edges("buys")] == [[2, 0], [1, 0]]
    assert g.nodes["user"].data["h"].tolist() == [1.0, 2.0, 3.0] and g.edges["buys"].data["w"].tolist() == [5.0, 6.0]


def reversed_graph():
    """DGL's reverse keeps the parent's relation order, so its reversed triples are not sorted."""
    g = unsorted_graph().reverse()
    assert g.canonical_etypes == [
        ("game", "develops", "developer"),
        ("user", "attracts", "game"),
        ("user", "follows", "user"),
        ("game", "plays", "user"),
    ]
    return g


def test_blocks_of_a_graph_whose_relations_are_not_sorted_name_their_parent_edges():
    g = reversed_graph()
    block = NeighborSampler(g, [-1], "user").sample(torch.arange(3))[0]
    src, dst = block.find_edges()
    parent_src, parent_dst = g.find_edges()
    assert block.num_edges() == 5
    assert torch.equal(block.src_ids[src], parent_src[block.parent_eids])
    assert torch.equal(block.src_ids[dst], parent_dst[block.parent_eids])


def test_batch_keeps_the_first_graphs_relation_order_as_dgl():
    g = reversed_graph()
    batched = gnnc.batch([g, g])
    assert batched.canonical_etypes == g.canonical_etypes
    assert batched.batch_num_edges("plays").tolist() == [3, 3] and batched.batch_num_edges("follows").tolist() == [2, 2]
    part = gnnc.unbatch(batched)[1]
    assert part.canonical_etypes == sorted(g.canonical_etypes)  # DGL's unbatch builds sorted graphs
    for rel in g.canonical_etypes:
        assert [t.tolist() for t in part.find_edges(rel)] == [t.tolist() for t in g.find_edges(rel)]


def test_typed_subgraph_of_a_graph_whose_relations_are_not_sorted_keeps_type_parameters_by_name():
    g = reversed_graph()
    g.etype_data["p"] = torch.tensor([0.0, 1.0, 2.0, 3.0])  # develops, attracts, follows, plays
    sub = typed_subgraph(g, g.ntypes, g.canonical_etypes)
    assert {rel: float(sub.etype_data["p"][sub.etype_id(rel)]) for rel in sub.canonical_etypes} == {
        rel: float(g.etype_data["p"][g.etype_id(rel)]) for rel in g.canonical_etypes
    }
