"""Graph mutation (DGL's ``add_nodes`` / ``add_edges`` / ``remove_nodes`` / ``remove_edges`` and the functional
forms): DGL 2.1's semantics, and no state derived from the old structure survives a mutation — compiled calls
between mutations give eager's numbers, by compiled plans on the new structure."""

import warnings

import pytest
import torch

import gnnc
from gnnc.compiler import driver
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.runtime.deferred import DeferredEdges, InternalOrderEdges
from tests.graphs import random_heterograph, random_homograph

BACKENDS = ["torch", "cpu"]


class _Attention(torch.nn.Module):
    """A GAT-like layer: apply_edges scores (an edge result a compiled call leaves unwritten), then
    update_all with a softmax over each node's in-edges."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3, dtype=torch.float64)

    def forward(self, g, x):
        with g.local_scope():
            g.ndata["z"] = self.lin(x)
            g.apply_edges(lambda e: {"e": torch.nn.functional.leaky_relu((e.src["z"] + e.dst["z"]).sum(-1, True))})
            g.update_all(
                lambda e: {"m": e.src["z"], "e": e.data["e"]},
                lambda n: {"h": (torch.softmax(n.mailbox["e"], 1) * n.mailbox["m"]).sum(1)},
            )
            return g.ndata["h"]


class _RelationSum(torch.nn.Module):
    """A relation call: each 'follows' edge carries its source's features, scaled by a learned weight."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3, dtype=torch.float64)

    def forward(self, g, x):
        with g.local_scope():
            g.nodes["user"].data["z"] = self.lin(x)
            g.update_all(lambda e: {"m": e.src["z"] * 2.0}, lambda n: {"h": n.mailbox["m"].sum(1)}, etype="follows")
            return g.nodes["user"].data["h"]


def _compiled_matches_eager(model, compiled, g, x, want_plans: int):
    """``compiled``'s result on ``g`` equals the eager ``model``'s, every call by a plan on ``g``'s current
    structure."""
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        got = compiled(g, x)
    assert len(plans) == want_plans and all(p.dfg is not None for p in plans), [p.fallback for p in plans]
    assert all(p.context.index is g.index for p in plans)  # contexts built for the structure as it is now
    torch.testing.assert_close(got, model(g, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_calls_between_mutations_give_eagers_numbers(backend):
    g = random_homograph(12, 40, seed=1)
    model, gen = _Attention(), torch.Generator().manual_seed(0)
    compiled = gnnc.compile(model, backend=backend)  # one model, its plans reused on every structure
    mutations = [
        lambda: None,
        lambda: g.add_edges([0, 3, 12], [5, 13, 2]),
        lambda: g.remove_nodes([1, 7]),
        lambda: g.add_nodes(3),
        lambda: g.remove_edges(torch.arange(0, 20, 3)),
        lambda: g.add_edges(torch.arange(g.num_nodes()), torch.arange(g.num_nodes())),
    ]
    sizes = []
    for mutate in mutations:
        mutate()
        sizes.append((g.num_nodes(), g.num_edges()))
        x = torch.randn(g.num_nodes(), 4, generator=gen, dtype=torch.float64)
        _compiled_matches_eager(model, compiled, g, x, 2)
    assert len(set(sizes)) == len(sizes)  # every mutation changed the structure


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_relation_calls_between_mutations_give_eagers_numbers(backend):
    g = random_heterograph(seed=3)
    model, gen = _RelationSum(), torch.Generator().manual_seed(0)
    compiled = gnnc.compile(model, backend=backend)
    follows = ("user", "follows", "user")
    mutations = [
        lambda: None,
        lambda: g.add_edges([0, 1], [2, g.num_nodes("user")], etype=follows),
        lambda: g.remove_nodes([0, 2], ntype="user"),
        lambda: g.remove_edges([0, 1, 2], etype=follows),
        lambda: g.add_nodes(2, ntype="user"),
    ]
    for mutate in mutations:
        mutate()
        x = torch.randn(g.num_nodes("user"), 4, generator=gen, dtype=torch.float64)
        _compiled_matches_eager(model, compiled, g, x, 1)


def test_an_edge_result_left_unwritten_is_computed_on_the_structure_it_was_made_for():
    g = random_homograph(10, 30, seed=2)
    src, dst = g.edges()
    perm = torch.randperm(src.numel(), generator=torch.Generator().manual_seed(0))
    g = gnnc.graph((src[perm], dst[perm]), num_nodes=10)  # user and internal edge orders differ
    gen = torch.Generator().manual_seed(1)
    g.ndata["z"], g.ndata["w"] = (torch.randn(10, 3, dtype=torch.float64, generator=gen) for _ in range(2))

    def scores(e):  # an SDDMM of node scores the plan computes: left unwritten
        return {"e": (e.src["z"] * e.src["w"]).sum(-1, keepdim=True) + (e.dst["z"] * 2.0).sum(-1, keepdim=True)}

    def products(e):  # a dot product: kept in the graph's internal edge order until read
        return {"e": (e.src["z"] * e.dst["w"]).sum(-1, keepdim=True)}

    removed = [0, 4, 5]
    keep = torch.ones(g.num_edges(), dtype=torch.bool)
    keep[removed] = False
    for udf, kind in ((scores, DeferredEdges), (products, InternalOrderEdges)):
        with g.local_scope():
            g.apply_edges(udf, compile=False)
            want = g.edata["e"]
        for mutate, rows in (
            (lambda h: h.remove_edges(removed), want[keep]),
            (lambda h: h.add_edges([1], [2]), torch.cat([want, want.new_zeros(1, 1)])),
        ):
            h = g.clone()
            driver.clear_cache()  # a plan whose result was read runs in user order: nothing left to compute
            h.apply_edges(udf, compile=True)
            assert isinstance(h._estore.peek_whole("e"), kind)
            mutate(h)
            torch.testing.assert_close(h.edata["e"], rows, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------- DGL's semantics
def _uv(g, etype=None):
    return tuple(ids.tolist() for ids in g.edges(etype=etype))


def test_new_rows_come_from_data_or_the_initializer():
    g = gnnc.graph(([0, 1], [1, 2]))
    g.ndata["h"] = torch.tensor([[1.0], [2.0], [3.0]])
    g.ndata["n"] = torch.tensor([1, 2, 3])
    calls = []

    def init(shape, dtype, device, id_range):
        calls.append(id_range)
        return torch.full(shape, -1, dtype=dtype, device=device)

    g.set_n_initializer(init, field="h")
    g.add_nodes(2)
    assert g.ndata["h"].flatten().tolist() == [1, 2, 3, -1, -1] and g.ndata["n"].tolist() == [1, 2, 3, 0, 0]
    assert calls == [slice(3, 5)]  # DGL's id_range: the new rows' ids
    g.add_nodes(1, data={"n": torch.tensor([9]), "new": torch.tensor([[5.0, 6.0]])})
    assert g.ndata["n"].tolist() == [1, 2, 3, 0, 0, 9] and g.ndata["n"].dtype == torch.int64
    assert g.ndata["new"].tolist() == [[0, 0]] * 5 + [[5, 6]] and g.ndata["h"][-1].item() == -1
    g.edata["w"] = torch.tensor([1.0, 2.0])
    g.add_edges(2, [0, 1], {"x": torch.ones(2, 2)})  # one source for every destination, as DGL
    assert _uv(g) == ([0, 1, 2, 2], [1, 2, 0, 1])
    assert g.edata["w"].tolist() == [1, 2, 0, 0] and g.edata["x"].tolist() == [[0, 0], [0, 0], [1, 1], [1, 1]]
    g.add_edges([7], [8])  # ids past the end add the nodes first, with initial rows
    assert g.num_nodes() == 9 and g.ndata["h"].flatten().tolist()[-3:] == [-1, -1, -1]


def test_removal_drops_incident_edges_and_features_and_store_ids_keeps_old_ids():
    g = gnnc.graph(([0, 0, 2, 3, 1], [0, 1, 2, 1, 3]), num_nodes=5)
    g.ndata["h"] = torch.arange(5)
    g.edata["w"] = torch.arange(5) * 10
    g.remove_nodes(torch.tensor([1]))
    assert g.num_nodes() == 4 and g.ndata["h"].tolist() == [0, 2, 3, 4]
    assert _uv(g) == ([0, 1], [0, 1]) and g.edata["w"].tolist() == [0, 20]
    assert "_ID" not in g.ndata and "_ID" not in g.edata
    g.remove_nodes([3], store_ids=True)
    assert g.ndata["_ID"].tolist() == [0, 1, 2] and g.edata["_ID"].tolist() == [0, 1]
    g.remove_edges(0, store_ids=True)
    assert g.edata["_ID"].tolist() == [1] and g.edata["w"].tolist() == [20] and g.ndata["_ID"].tolist() == [0, 1, 2]
    g.remove_edges([])  # nothing to remove: nothing changes
    assert g.num_edges() == 1


def test_heterograph_mutation_by_type():
    g = gnnc.heterograph(
        {("user", "plays", "game"): ([0, 1, 1, 2], [0, 0, 1, 1]), ("dev", "makes", "game"): ([0, 1], [0, 1])},
        idtype=torch.int32,
    )
    g.nodes["user"].data["h"] = torch.tensor([1, 1, 1])
    g.nodes["game"].data["h"] = torch.tensor([2, 2])
    g.edges["plays"].data["h"] = torch.tensor([1, 2, 3, 4])
    g.add_edges([0, 2], [2, 3], etype="plays")
    assert g.num_nodes("game") == 4 and g.num_nodes("dev") == 2 and g.nodes["game"].data["h"].tolist() == [2, 2, 0, 0]
    assert g.edges["plays"].data["h"].tolist() == [1, 2, 3, 4, 0, 0] and g.num_edges("makes") == 2
    g.remove_nodes(0, ntype="game", store_ids=True)
    assert (
        g.num_edges("plays") == 4 and g.num_edges("makes") == 1 and g.edges["plays"].data["h"].tolist() == [3, 4, 0, 0]
    )
    assert g.nodes["game"].data["_ID"].tolist() == [1, 2, 3] and g.nodes["user"].data["_ID"].tolist() == [0, 1, 2]
    assert g.nodes["game"].data["_ID"].dtype == torch.int32 and g.edges["makes"].data["_ID"].tolist() == [1]
    src, dst = g.edges(etype="plays")
    assert src.tolist() == [1, 2, 0, 2] and dst.tolist() == [0, 0, 1, 2] and src.dtype == torch.int32
    g.add_nodes(2, data={"x": torch.ones(2, 3)}, ntype="dev")
    assert g.nodes["dev"].data["x"].tolist() == [[0] * 3] * 2 + [[1] * 3] * 2 and "x" not in g.nodes["user"].data


def test_mutation_errors_name_the_culprit():
    g = gnnc.heterograph({("user", "plays", "game"): ([0, 1], [1, 2]), ("user", "follows", "user"): ([0], [1])})
    g.nodes["user"].data["h"] = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"name the node type"):
        g.add_nodes(1)
    with pytest.raises(ValueError, match=r"add_edges needs etype="):
        g.add_edges(0, 1)
    with pytest.raises(ValueError, match=r"node id 5 at position 1 is out of range \[0, 2\).*|.*'user'.*5"):
        g.remove_nodes([0, 5], ntype="user")
    with pytest.raises(ValueError, match=r"remove_edges\(eids\) of relation \('user', 'plays', 'game'\): edge id 2"):
        g.remove_edges([2], etype="plays")
    with pytest.raises(ValueError, match=r"add_edges\(v\).*node id -1 at position 0"):
        g.add_edges([0], [-1], etype="follows")
    with pytest.raises(ValueError, match=r"feature 'h' for the new nodes of type 'user' has \(2,\) rows, expected 1"):
        g.add_nodes(1, data={"h": torch.zeros(2, 3)}, ntype="user")
    with pytest.raises(ValueError, match=r"feature 'h' of type 'user' is torch.float32 with rows of shape \(3,\)"):
        g.add_nodes(1, data={"h": torch.zeros(1, 4)}, ntype="user")
    with pytest.raises(ValueError, match=r"3 source ids but 2 destination ids"):
        g.add_edges([0, 1, 0], [1, 0], etype="follows")
    with pytest.raises(ValueError, match=r"non-negative integer"):
        g.add_nodes(-1, ntype="user")
    assert g.num_nodes("user") == 2 and g.num_edges() == 3  # a refused mutation changes nothing
    block = gnnc.data.neighbor_sampler.NeighborSampler(random_heterograph(seed=0), [2], "user", seed=0).sample(
        torch.tensor([0])
    )[0]
    with pytest.raises(TypeError, match="a block cannot be mutated"):
        block.add_nodes(1, ntype="user")


def test_batch_counts_follow_removals_and_go_with_additions():
    one, two = gnnc.graph(([0, 1], [1, 2])), gnnc.graph(([0, 1, 2], [1, 2, 3]))
    g = gnnc.batch([one, two])
    g.remove_nodes([1, 4])  # node 1 of the first graph, node 1 of the second
    assert g.batch_num_nodes().tolist() == [2, 3] and g.batch_num_edges().tolist() == [0, 1]
    g.remove_edges([0])
    assert g.batch_num_edges().tolist() == [0, 0] and g.batch_size == 2
    g.add_nodes(1)
    assert g.batch_size == 1  # DGL drops a batch's counts when it grows


def test_functional_forms_return_new_graphs_and_leave_theirs():
    g = gnnc.graph(([0, 1, 2], [1, 1, 2]))
    g.edata["w"] = torch.tensor([[1.0], [2.0], [4.0]])
    g.ndata["h"] = torch.ones(3, 2)
    before = (g.index, g.edges(), g.edata["w"].clone(), g.ndata["h"].clone())

    def unchanged():
        assert g.index is before[0] and g.num_nodes() == 3 and g.num_edges() == 3
        torch.testing.assert_close(g.edata["w"], before[2])
        torch.testing.assert_close(g.ndata["h"], before[3])

    assert gnnc.add_nodes(g, 2).num_nodes() == 5
    assert gnnc.add_edges(g, [0], [2]).num_edges() == 4
    assert gnnc.remove_nodes(g, [0]).num_nodes() == 2
    assert gnnc.remove_edges(g, [0, 1]).num_edges() == 1
    looped = gnnc.add_self_loop(g, fill_data="mean")
    assert looped.edges()[0].tolist() == [0, 1, 2, 0, 1, 2] and looped.edata["w"].flatten().tolist() == [
        1,
        2,
        4,
        0,
        1.5,
        4,
    ]
    named = gnnc.add_self_loop(g, edge_feat_names=[], fill_data=5.0)
    assert named.edata["w"].flatten().tolist() == [1, 2, 4, 0, 0, 0]  # not named: the initializer's rows
    assert gnnc.add_self_loop(g).edata["w"].flatten().tolist() == [1, 2, 4, 1, 1, 1]
    plain = gnnc.remove_self_loop(g)
    assert plain.edges()[0].tolist() == [0] and plain.edata["w"].flatten().tolist() == [1]
    unchanged()
    assert g.clone().index is g.index
    copy = g.clone()
    copy.add_edges(0, 0)
    unchanged()


def test_views_taken_before_a_mutation_see_it():
    g = gnnc.graph(([0, 1], [1, 2]))
    g.ndata["h"] = torch.ones(3)
    ndata, users = g.ndata, g.nodes["_N"].data
    g.add_nodes(2)
    assert ndata["h"].tolist() == [1, 1, 1, 0, 0] and users["h"].shape[0] == 5
