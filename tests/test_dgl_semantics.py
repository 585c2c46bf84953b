"""DGL's documented contract for message passing, where gnnc's eager executor once differed from DGL 2.1.

Each expectation was checked against DGL 2.1 itself; here they are written as plain torch oracles. The
compiled variants prove a compiled plan ran (``recording``) and fail on any fallback.
"""

import warnings

import pytest
import torch

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.message_passing import compiling


def _tree():
    """Children -> parent edges of a 7-node binary tree (0 the root)."""
    return gnnc.graph((torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([0, 0, 1, 1, 2, 2])), num_nodes=7)


def _child_sum(nodes):
    return {"iou": nodes.mailbox["h"].sum(1) * 3, "c": nodes.mailbox["c"].sum(1)}


def _cell(nodes):
    return {"h": torch.tanh(nodes.data["iou"] + nodes.data["c"]), "c": nodes.data["c"] * 2}


def _messages(edges):
    return {"h": edges.src["h"], "c": edges.src["c"]}


def test_pull_with_an_update_keeps_only_the_updates_results():
    """The tree-LSTM step: the reduce's 'iou' feeds the update but is not written (DGL 2.1)."""
    g = _tree()
    iou, h, c = torch.randn(7, 4), torch.randn(7, 4), torch.randn(7, 4)
    g.ndata.update({"iou": iou.clone(), "h": h.clone(), "c": c.clone()})
    g.pull(torch.tensor([1, 3]), _messages, _child_sum, _cell)
    torch.testing.assert_close(g.ndata["iou"], iou)  # never the reduced value
    children = h[3] + h[4]
    c1 = c[3] + c[4]
    torch.testing.assert_close(g.ndata["h"][1], torch.tanh(children * 3 + c1))
    torch.testing.assert_close(g.ndata["c"][1], c1 * 2)
    # node 3 has no in-edge among the pulled ones while node 1 has: its reduced rows are zeros (DGL's frame)
    torch.testing.assert_close(g.ndata["h"][3], torch.tanh(torch.zeros(4)))
    torch.testing.assert_close(g.ndata["c"][3], torch.zeros(4))
    torch.testing.assert_close(g.ndata["h"][[0, 2, 4, 5, 6]], h[[0, 2, 4, 5, 6]])


def test_pull_of_nodes_without_in_edges_never_calls_the_reduce():
    """DGL calls no reduce UDF on an empty bucket: a 0-row reshape there would fail, and nothing is written."""
    g = _tree()
    g.ndata["h"], g.ndata["z"] = torch.randn(7, 4), torch.full((7, 1), 7.0)

    def reshaping(nodes):
        return {"z": nodes.mailbox["m"].sum(1).reshape(nodes.batch_size(), -1, 2).sum((1, 2)).unsqueeze(1)}

    g.pull(torch.tensor([4, 5]), fn.copy_u("h", "m"), reshaping)
    assert torch.equal(g.ndata["z"], torch.full((7, 1), 7.0))
    g.pull(torch.tensor([4]), fn.copy_u("h", "m"), reshaping, lambda nodes: {"u": nodes.data["z"] + 1})
    assert torch.equal(g.ndata["u"][4], torch.tensor([8.0])) and torch.equal(g.ndata["u"][0], torch.tensor([0.0]))


@pytest.mark.parametrize("compile", [False, True])
def test_update_all_with_an_update_writes_only_its_results(compile):
    g = gnnc.graph((torch.tensor([0, 1, 2, 0]), torch.tensor([1, 2, 3, 3])), num_nodes=5)
    x = torch.arange(5.0).unsqueeze(1)
    g.ndata["x"] = x
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        g.update_all(
            lambda e: {"m": e.src["x"]},
            lambda n: {"s": n.mailbox["m"].sum(1)},
            lambda n: {"y": n.data["s"] * 2 + n.data["x"]},
            compile=compile,
        )
    assert sorted(g.ndata.keys()) == ["x", "y"]
    torch.testing.assert_close(g.ndata["y"], torch.tensor([[0.0], [1.0], [4.0], [7.0], [4.0]]))
    assert [p.module is not None for p in plans] == ([True] if compile else [])


def test_initializers_fill_the_rows_a_call_leaves_unset():
    """``set_n_initializer``: zero in-degree rows of a reduce UDF's result and rows a pull does not reach."""
    g = gnnc.graph(([1, 2, 3, 4], [0, 0, 0, 0]))

    def twos(shape, dtype, device, id_range):
        return torch.full(shape, 2.0, dtype=dtype, device=device)

    g.set_n_initializer(twos, "x")
    h = torch.randn(5, 3)
    g.ndata["h"] = h
    g.update_all(
        lambda e: {"m": e.src["h"]},
        lambda n: {"x": n.data["h"] + n.mailbox["m"].sum(1)},
        lambda n: {"x": n.data["x"] * 2},
    )
    torch.testing.assert_close(g.ndata["x"][1:], torch.full((4, 3), 4.0))
    torch.testing.assert_close(g.ndata["x"][0], 2 * h.sum(0))
    g.pull([0], fn.copy_u("h", "m"), fn.sum("m", "y"))
    torch.testing.assert_close(g.ndata["y"][0], h[1:].sum(0))
    assert torch.equal(g.ndata["y"][1:], torch.zeros(4, 3))  # the initializer is of field 'x' only
    g.set_n_initializer(twos)
    g.pull([0], fn.copy_u("h", "m"), fn.sum("m", "w"))
    assert torch.equal(g.ndata["w"][1:], torch.full((4, 3), 2.0))


def test_a_compiled_call_on_a_graph_with_an_initializer_runs_eagerly_and_says_so():
    g = gnnc.graph(([1, 2], [0, 0]), num_nodes=4)
    g.set_n_initializer(lambda shape, dtype, device, ids: torch.ones(shape, dtype=dtype, device=device), "s")
    g.ndata["h"] = torch.randn(4, 2)
    with pytest.warns(FallbackWarning, match="node initializer"):
        g.update_all(lambda e: {"m": e.src["h"]}, lambda n: {"s": n.mailbox["m"].sum(1)}, compile=True)
    assert torch.equal(g.ndata["s"][1:], torch.ones(3, 2))


def test_send_and_recv_takes_node_pairs_as_dgl():
    g = gnnc.graph(([0, 1, 2, 1], [1, 2, 0, 2]))
    g.ndata["h"] = torch.tensor([[1.0], [10.0], [100.0]])
    g.send_and_recv((torch.tensor([1, 2]), torch.tensor([2, 0])), fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert g.ndata["s"].flatten().tolist() == [100.0, 0.0, 10.0]  # (1, 2): the edge of smaller id only
    g.apply_edges(lambda e: {"w": e.src["h"] * 2}, ([0], [1]))
    assert g.edata["w"].flatten().tolist() == [2.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"\(2, 1\) at position 0 does not form an edge"):
        g.send_and_recv(([2], [1]), fn.copy_u("h", "m"), fn.sum("m", "s"))


def test_send_and_recv_over_all_edges_as_dgl_on_a_multigraph_with_a_node_without_in_edges():
    """``send_and_recv(g.edges(), ...)`` (published code's spelling of update_all): each pair names the edge
    of smallest id, so a doubled edge carries that one twice; a node no edge reaches keeps its old rows."""
    g = gnnc.graph(([0, 0, 1, 2], [1, 1, 2, 2]), num_nodes=4)
    g.ndata["h"] = torch.tensor([[1.0], [2.0], [4.0], [8.0]])
    g.edata["w"] = torch.tensor([[1.0], [10.0], [100.0], [1000.0]])
    g.ndata["o"] = torch.full((4, 1), -7.0)
    for _ in range(2):  # the second call reuses the first call's compute graph
        g.send_and_recv(g.edges(), fn.u_mul_e("h", "w", "m"), fn.sum("m", "o"))
        assert g.ndata["o"].flatten().tolist() == [-7.0, 2.0, 4200.0, -7.0]  # DGL 2.1's numbers


def test_a_partial_calls_compute_graph_is_made_once_for_the_same_edges_and_anew_for_others():
    from unittest import mock

    from gnnc.graph.index import GraphIndex

    g = gnnc.graph(([0, 1, 2, 3, 3], [1, 2, 3, 0, 1]))
    g.ndata["h"] = torch.arange(4.0).unsqueeze(1)
    built = mock.Mock(wraps=GraphIndex.from_relation_blocks)
    with mock.patch.object(GraphIndex, "from_relation_blocks", built), compiling({}), recording() as plans:
        for eids, want in (([4, 1], [0, 3, 1, 0]), ([4, 1], [0, 3, 1, 0]), ([0, 3], [3, 0, 1, 0])):  # DGL 2.1's
            g.send_and_recv(torch.tensor(eids), fn.copy_u("h", "m"), fn.sum("m", "s"))
            assert g.ndata["s"].flatten().tolist() == want
    assert built.call_count == 2
    assert len(plans) == 3 and all(p.module is not None for p in plans)


def test_a_node_udf_looping_over_its_features_compiles():
    """DGL's test_update_all_multi_fallback: ``for k, v in nodes.data.items()`` in an update function."""

    def update(nodes):
        return {k: 2 * v for k, v in nodes.data.items() if k.startswith("o")}

    def run(g):
        g.ndata["h"] = torch.arange(8.0).reshape(4, 2)
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "o1"), update)
        return dict(g.ndata)

    want = run(gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0])))
    with warnings.catch_warnings(), compiling({}), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        got = run(gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0])))
    assert plans and all(p.module is not None for p in plans)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_multi_update_all_merges_the_relations_that_produced_a_key_and_runs_per_relation_updates():
    g = gnnc.heterograph({("a", "x", "b"): ([0, 1], [0, 0]), ("a", "y", "b"): ([], []), ("b", "z", "b"): ([0], [1])})
    g.nodes["a"].data["h"] = torch.tensor([[1.0], [2.0]])
    g.nodes["b"].data["h"] = torch.tensor([[5.0], [7.0]])
    g.multi_update_all(
        {
            "x": (fn.copy_u("h", "m"), fn.sum("m", "s")),
            "y": (lambda e: {"m": e.src["h"]}, lambda n: {"s": n.mailbox["m"].sum(1)}),
            "z": (fn.copy_u("h", "m"), fn.sum("m", "s"), lambda n: {"s": n.data["s"] * 10}),
        },
        "sum",
    )
    # 'y' has no edges: its reduce UDF gives nothing, and only x and z (updated per relation) are summed
    assert g.nodes["b"].data["s"].flatten().tolist() == [3.0, 50.0]


def test_local_var_shares_features_and_keeps_its_writes():
    g = gnnc.graph(([0, 1], [1, 2]))
    g.ndata["h"] = torch.ones(3, 2)
    local = g.local_var()
    assert local.ndata["h"] is g.ndata["h"]
    local.ndata["h"] = torch.zeros(3, 2)
    local.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"))
    del local.ndata["h"]
    assert sorted(g.ndata.keys()) == ["h"] and torch.equal(g.ndata["h"], torch.ones(3, 2))
    assert local.num_edges() == 2 and sorted(local.ndata.keys()) == ["s"]


def test_degrees_take_nodes_first_as_dgl():
    g = gnnc.heterograph({("u", "f", "u"): ([0, 1, 1], [1, 2, 2]), ("u", "p", "i"): ([0], [0])})
    assert g.in_degrees(2, "f") == 2 and isinstance(g.in_degrees(2, "f"), int)
    assert g.in_degrees([2, 0], "f").tolist() == [2, 0]
    assert g.out_degrees(1, etype="f") == 2 and g.in_degrees(etype="p").tolist() == [1]
    assert g["f"].in_degrees().tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match="name the relation as etype='f'"):
        g.in_degrees("f")
    with pytest.raises(ValueError, match="node id 3 at position 0 is out of range"):
        g.in_degrees(3, "f")


def _gated_message(edges):
    """benchmarking-gnns' GatedGCN message: it writes the new edge value into the batch, and reads it back."""
    e = edges.data["e"] + edges.src["h"] - edges.dst["h"]
    edges.data["e"] = e
    return {"m": torch.sigmoid(edges.data["e"]) * edges.src["h"]}


def _zeroing_reduce(nodes):
    nodes.data["h"] = nodes.data["h"] * 0  # a degree bucket's rows: the write stays the batch's
    return {"o": nodes.mailbox["m"].sum(1) + nodes.data["h"]}


def _edge_graph():
    gen = torch.Generator().manual_seed(3)
    g = gnnc.graph(
        (torch.randint(0, 12, (40,), generator=gen), torch.randint(0, 12, (40,), generator=gen)), num_nodes=12
    )
    g.ndata["h"] = torch.randn(12, 3, generator=gen, dtype=torch.float64)
    g.edata["e"] = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    return g


def test_a_message_udf_writing_edge_data_stores_it_as_dgl():
    g = _edge_graph()
    h, e = g.ndata["h"], g.edata["e"]
    src, dst = g.find_edges()
    g.update_all(_gated_message, _zeroing_reduce)
    new_e = e + h[src] - h[dst]
    torch.testing.assert_close(g.edata["e"], new_e)  # every edge of the call: stored in the graph
    torch.testing.assert_close(g.ndata["h"], h)
    want = torch.zeros(12, 3, dtype=torch.float64).index_add(0, dst, torch.sigmoid(new_e) * h[src])
    torch.testing.assert_close(g.ndata["o"], want)
    g.send_and_recv(torch.tensor([1, 2]), _gated_message, fn.sum("m", "s"))  # chosen edges: not stored
    torch.testing.assert_close(g.edata["e"], new_e)
    g.apply_nodes(lambda nodes: (nodes.data.__setitem__("k", nodes.data["h"]), {"q": nodes.data["k"] + 1})[1])
    assert "k" not in g.ndata and torch.equal(g.ndata["q"], h + 1)
    with pytest.raises(ValueError, match=r"edges.data\['e'\] = ...: expected a tensor of 40 rows"):
        g.apply_edges(lambda edges: edges.data.__setitem__("e", edges.data["e"][:3]))


def test_a_compiled_call_whose_reduce_writes_its_batch_falls_back_with_eagers_numbers():
    """The message's ``edges.data`` write compiles (tests/test_edge_writes.py); the reduce's write into its
    degree bucket's ``nodes.data`` does not, and says so."""
    eager, compiled = _edge_graph(), _edge_graph()
    eager.update_all(_gated_message, _zeroing_reduce)
    with pytest.warns(FallbackWarning, match="nodes.data"):
        compiled.update_all(_gated_message, _zeroing_reduce, compile=True)
    for key in ("e", "o", "h"):
        frame = "edata" if key == "e" else "ndata"
        torch.testing.assert_close(getattr(compiled, frame)[key], getattr(eager, frame)[key])


def test_a_relation_slice_has_dgls_node_spaces_queries_and_partial_calls():
    g = gnnc.heterograph({("u", "f", "u"): ([0, 1], [1, 2]), ("u", "p", "i"): ([0, 2, 2], [0, 1, 1])})
    plays = g["p"]
    assert plays.nodes("i").tolist() == [0, 1] and plays.srcnodes().tolist() == [0, 1, 2]
    assert plays.dstnodes["i"].data is not None and plays.in_degrees(1) == 2
    assert [t.tolist() for t in plays.edges(form="all")] == [[0, 2, 2], [0, 1, 1], [0, 1, 2]]
    assert plays.edge_ids(2, 1) == 1 and plays.in_edges([0], form="eid").tolist() == [0]
    with pytest.raises(KeyError, match="not among this view's node types"):
        plays.nodes["x"]
    g.nodes["u"].data["h"] = torch.tensor([[1.0], [10.0], [100.0]])
    plays.pull([1], fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert g.nodes["i"].data["s"].flatten().tolist() == [0.0, 200.0]
    plays.send_and_recv([0], fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert g.nodes["i"].data["s"].flatten().tolist() == [1.0, 200.0]
    g["f"].push([1], fn.copy_u("h", "m"), fn.sum("m", "t"))
    assert g.nodes["u"].data["t"].flatten().tolist() == [0.0, 0.0, 10.0]


@pytest.mark.parametrize("compile", [False, True])
def test_a_partial_calls_udf_sees_the_edges_ids_in_the_graph(compile):
    """DGL's compute graph keeps each edge's id in the graph it came from (``EID``)."""
    g = gnnc.graph(([0, 1, 2, 3, 0], [1, 2, 3, 0, 2]))
    g.ndata["h"] = torch.ones(4, 1)
    g.send_and_recv([4, 1], lambda e: {"m": e.edges()[2].unsqueeze(1).float()}, fn.sum("m", "s"))
    assert g.ndata["s"].flatten().tolist() == [0.0, 0.0, 5.0, 0.0]
    with warnings.catch_warnings(record=True) as caught:  # edges() reads the batch: not compiled
        warnings.simplefilter("always")
        g.apply_edges(lambda e: {"id": e.edges()[2].unsqueeze(1).float() + e.src["h"]}, [3, 0], compile=compile)
    assert [w.category for w in caught] == ([FallbackWarning] if compile else [])
    assert g.edata["id"].flatten().tolist() == [1.0, 0.0, 0.0, 4.0, 0.0]


def test_graph_data_in_dgls_forms():
    pairs = gnnc.graph([(0, 1), (1, 2), (2, 0)])
    coo = gnnc.graph(("coo", (torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))))
    csr = gnnc.graph(("csr", ([0, 1, 2, 3], [1, 2, 0], [])))
    csc = gnnc.graph(("csc", ([0, 1, 2, 3], [2, 0, 1], [2, 0, 1])))  # rows are destinations, ids permuted
    for g in (pairs, coo, csr, csc):
        assert [t.tolist() for t in g.edges()] == [[0, 1, 2], [1, 2, 0]]
    assert gnnc.graph([]).num_nodes() == 0 and gnnc.graph([], num_nodes=3).num_edges() == 0
    hg = gnnc.heterograph({("a", "r", "b"): ("csr", ([0, 2, 2], [0, 1], []))}, num_nodes_dict={"a": 2, "b": 3})
    assert hg.num_nodes("b") == 3 and hg.edges(etype="r")[1].tolist() == [0, 1]
    with pytest.raises(ValueError, match="indptr must rise from 0"):
        gnnc.graph(("csr", ([0, 5], [1], [])))
    with pytest.raises(ValueError, match="edge ids must be a permutation"):
        gnnc.graph(("csr", ([0, 1, 2], [1, 0], [0, 0])))


def test_queries_return_ids_of_the_graphs_idtype():
    g = gnnc.graph((torch.tensor([0, 1, 1], dtype=torch.int32), torch.tensor([1, 2, 2], dtype=torch.int32)))
    assert g.idtype == torch.int32 and gnnc.graph(([0], [1]), idtype=torch.int32).idtype == torch.int32
    results = [
        *g.edges(form="all"),
        g.nodes(),
        g.in_degrees(),
        g.edge_ids([1], [2]),
        *g.find_edges([2]),
        *g.in_edges([2], form="all"),
        g.local_var().nodes(),
    ]
    assert all(t.dtype == torch.int32 for t in results)
    wide = g.long()
    assert wide.idtype == torch.int64 and wide.edges()[0].dtype == torch.int64 and wide.int().idtype == torch.int32
    g.ndata["h"] = torch.ones(3, 1)
    g.pull([2], fn.copy_u("h", "m"), fn.sum("m", "s"))
    assert g.ndata["s"].flatten().tolist() == [0.0, 0.0, 2.0]
    with pytest.raises(ValueError, match="idtype must be torch.int32 or torch.int64"):
        gnnc.graph(([0], [1]), idtype=torch.float32)


def test_node_and_edge_spaces_select_rows_as_dgl():
    g = gnnc.graph(([0, 1, 2, 1], [1, 2, 0, 2]))
    g.ndata["h"] = torch.zeros(3, 2)
    g.nodes[[2, 0]].data["h"] = torch.full((2, 2), 5.0)
    assert g.ndata["h"][:, 0].tolist() == [5.0, 0.0, 5.0] and g.nodes[[1]].data["h"].tolist() == [[0.0, 0.0]]
    g.nodes[[1]].data["new"] = torch.ones(1, 3)  # a new feature: the other rows from the initializer
    assert g.ndata["new"].sum().item() == 3.0
    g.edges[[0, 3]].data["w"] = torch.tensor([[1.0], [2.0]])
    g.edges[torch.tensor([1]), torch.tensor([2])].data["w"] = torch.tensor([[9.0]])  # (u, v): the edge of id 1
    assert g.edges[:].data["w"].flatten().tolist() == [1.0, 9.0, 0.0, 2.0]
    hg = gnnc.heterograph({("u", "f", "u"): ([0], [1]), ("u", "p", "i"): ([0], [0])})
    hg.nodes[[1], "u"].data["x"] = torch.ones(1, 1)
    assert hg.nodes["u"].data["x"].flatten().tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="expected 2 rows"):
        g.nodes[[0, 1]].data["h"] = torch.ones(3, 2)
    with pytest.raises(ValueError, match=r"nodes\[ids\]: node id 7 at position 0 is out of range"):
        g.nodes[[7]].data["h"]


def test_multigraph_and_initializer_module():
    assert gnnc.graph(([0, 0], [1, 1])).is_multigraph and not gnnc.graph(([0, 1], [1, 0])).is_multigraph
    from gnnc.graph.initializers import zero_initializer

    zeros = zero_initializer((2, 3), torch.float64, "cpu", slice(0, 2))
    assert torch.equal(zeros, torch.zeros(2, 3, dtype=torch.float64))


@pytest.mark.parametrize("compile", [False, True])
def test_calls_without_etype_on_heterographs_run_per_relation_as_dgl(compile):
    """One relation between two node types: the call is that relation's (DGL issue 1088). Several relations
    and built-ins: relation by relation, reduced across relations by the same reducer."""
    one = gnnc.heterograph({("U", "E", "V"): ([0, 1, 2], [1, 2, 3])})
    one.nodes["U"].data["x"] = torch.tensor([[1.0], [2.0], [3.0]])
    one.update_all(fn.copy_u("x", "m"), fn.sum("m", "y"), compile=compile)
    assert one.nodes["V"].data["y"].flatten().tolist() == [0.0, 1.0, 2.0, 3.0] and "y" not in one.nodes["U"].data
    g = gnnc.heterograph(
        {
            ("user", "plays", "game"): ([0, 1, 1], [0, 0, 1]),
            ("dev", "makes", "game"): ([0], [1]),
            ("user", "follows", "user"): ([0], [1]),
        }
    )
    g.nodes["user"].data["h"] = torch.tensor([[1.0], [2.0]])
    g.nodes["dev"].data["h"] = torch.tensor([[10.0]])  # the games have no 'h'
    g.update_all(fn.copy_u("h", "m"), fn.max("m", "y"), compile=compile)
    assert g.nodes["game"].data["y"].flatten().tolist() == [2.0, 10.0]
    assert g.nodes["user"].data["y"].flatten().tolist() == [0.0, 1.0] and "y" not in g.nodes["dev"].data
    g.apply_edges(fn.copy_u("h", "e"), compile=compile)
    assert g.edges["makes"].data["e"].flatten().tolist() == [10.0]
    with pytest.raises(NotImplementedError, match="multi_update_all"):
        g.update_all(fn.copy_u("h", "m"), fn.mean("m", "y"))


def test_structure_queries_as_dgl():
    g = gnnc.graph(([0, 0, 1, 2, 2], [1, 1, 2, 2, 0]))
    assert g.has_nodes(2) and g.has_nodes([0, 5]).tolist() == [True, False]
    assert g.has_edges_between([0, 1, 2], [1, 0, 2]).tolist() == [True, False, True] and not g.has_edges_between(0, 2)
    assert g.predecessors(2).tolist() == [1, 2] and g.successors(0).tolist() == [1, 1]
    assert g.adj_external().to_dense().tolist() == [[0, 2, 0], [0, 0, 1], [1, 0, 1]]
    assert g.adj_external(transpose=True, scipy_fmt="csr").toarray().tolist() == [[0, 0, 1], [2, 0, 0], [0, 1, 1]]
    assert g.inc("both").to_dense()[0].tolist() == [-1, -1, 0, 0, 1]  # out-edges -1, in-edges 1, self loop 0
    assert g.inc("in").to_dense()[2].tolist() == [0, 0, 1, 1, 0]
    bipartite = gnnc.heterograph({("u", "p", "i"): ([0, 1], [0, 0])})
    assert [t.tolist() for t in bipartite.edges()] == [[0, 1], [0, 0]]  # the only relation's local ids
    assert bipartite["p"].predecessors(0).tolist() == [0, 1]


def test_partial_calls_on_an_int32_graph_compile():
    g = gnnc.graph(([0, 1, 2], [1, 2, 0]), idtype=torch.int32)
    g.ndata["h"] = torch.ones(3, 1)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        with compiling({}):
            g.pull(
                torch.tensor([1], dtype=torch.int32),
                lambda e: {"m": e.src["h"] * 2},
                lambda n: {"s": n.mailbox["m"].sum(1)},
            )
    assert g.ndata["s"].flatten().tolist() == [0.0, 2.0, 0.0] and plans and plans[0].module is not None
