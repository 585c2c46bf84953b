"""Type subgraphs share their parent's features, as DGL's do (gnnc.graph.shared_types).

Every expectation here was checked against DGL 2.1 running the same code in the peer interpreter
(``edge_type_subgraph``, ``node_type_subgraph`` and ``g[etype]`` share the parent's frames; ``local_scope`` on
either graph works on copies; the other subgraph functions and ``to`` copy).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import gnnc
import gnnc.function as fn
from gnnc.compiler import driver as compiled


def _graph():
    g = gnnc.heterograph(
        {
            ("user", "follows", "user"): ([0, 1], [1, 2]),
            ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
            ("developer", "develops", "game"): ([0, 1], [0, 1]),
        }
    )
    g.nodes["user"].data["h"] = torch.randn(3, 2)
    g.edges["follows"].data["w"] = torch.randn(2, 2)
    return g


TYPE_SUBGRAPHS = {
    "node_type_subgraph": lambda g: g.node_type_subgraph(["user", "game"]),
    "edge_type_subgraph": lambda g: g.edge_type_subgraph(["follows"]),
    "edge_type_subgraph of every relation": lambda g: g.edge_type_subgraph(["develops", "follows", "plays"]),
    "nested": lambda g: g.node_type_subgraph(["user", "game"]).edge_type_subgraph(["follows"]),
}


@pytest.mark.parametrize("take", TYPE_SUBGRAPHS.values(), ids=TYPE_SUBGRAPHS.keys())
def test_writes_replacements_and_deletions_show_through_either_graph(take):
    g = _graph()
    sg = take(g)
    g.nodes["user"].data["new"] = torch.ones(3, 1)
    assert "new" in sg.nodes["user"].data
    g.nodes["user"].data["h"] = torch.zeros(3, 2)
    assert bool((sg.nodes["user"].data["h"] == 0).all())
    sg.nodes["user"].data["from_sub"] = torch.full((3, 1), 7.0)
    sg.edges["follows"].data["e"] = torch.ones(2, 1)
    assert g.nodes["user"].data["from_sub"].sum() == 21 and "e" in g.edges["follows"].data
    del g.nodes["user"].data["h"]
    assert "h" not in sg.nodes["user"].data
    sg.nodes["user"].data.pop("new")
    assert "new" not in g.nodes["user"].data
    sg.nodes["user"].data["from_sub"][0] = 100.0  # the same tensor: an in-place write shows too
    assert g.nodes["user"].data["from_sub"][0, 0] == 100.0


def test_a_subgraph_of_one_node_type_reads_the_parents_tensor_itself():
    g = _graph()
    sg = g.edge_type_subgraph(["follows"])
    assert sg.ndata["h"] is g.nodes["user"].data["h"]
    sg.update_all(fn.copy_u("h", "m"), fn.sum("m", "o"))
    assert "o" in g.nodes["user"].data


def test_the_other_subgraphs_and_copies_keep_their_own_features():
    for take in (
        lambda g: g.subgraph({"user": [0, 1, 2], "game": [0, 1], "developer": [0, 1]}),
        lambda g: gnnc.in_subgraph(g, {"user": [1]}),
        lambda g: g.edge_subgraph({"follows": [0, 1]}, relabel_nodes=False),
        lambda g: g.edge_type_subgraph(["follows"]).to("cpu"),
        lambda g: g.edge_type_subgraph(["follows"]).local_var(),
    ):
        g = _graph()
        sg = take(g)
        g.nodes["user"].data["new"] = torch.ones(3, 1)
        assert "new" not in sg.nodes["user"].data
        sg.nodes["user"].data["mine"] = torch.ones(sg.num_nodes("user"), 1)
        assert "mine" not in g.nodes["user"].data


def test_local_scopes_follow_dgls_frames():
    g = _graph()
    sg = g.edge_type_subgraph(["follows"])
    with sg.local_scope():
        sg.ndata["x"] = torch.ones(3, 1)
        assert "x" not in g.nodes["user"].data  # the subgraph's scope writes a copy of its features
        g.nodes["user"].data["y"] = torch.ones(3, 1)
        assert "y" not in sg.ndata
    assert "y" in sg.ndata and "x" not in g.nodes["user"].data  # shared again, the scope's writes gone

    g = _graph()
    sg = g.edge_type_subgraph(["follows"])
    with g.local_scope():
        g.nodes["user"].data["x"] = torch.ones(3, 1)
        assert "x" not in sg.ndata  # the parent's scope sets its features aside; the subgraph keeps them
        sg.ndata["y"] = torch.ones(3, 1)
        assert "y" not in g.nodes["user"].data
    assert "y" in g.nodes["user"].data and "x" not in sg.ndata


def test_a_parent_mutation_that_changes_a_shared_type_ends_the_sharing_with_a_clear_error():
    g = _graph()
    sg = g.edge_type_subgraph(["follows"])
    other = g.edge_type_subgraph(["develops"])
    g.add_nodes(2, ntype="user")
    with pytest.raises(ValueError, match="take the subgraph again"):
        sg.ndata["h"]
    other.nodes["developer"].data["d"] = torch.ones(2, 1)  # its types kept their counts: still shared
    assert "d" in g.nodes["developer"].data


class _Layer(torch.nn.Module):
    def forward(self, sg):
        sg.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "out"))
        sg.apply_edges(lambda edges: {"s": (edges.src["h"] * edges.dst["out"]).sum(1, keepdim=True)})
        return sg.ndata["out"], sg.edata["s"]


class _ScopedLayer(torch.nn.Module):
    """Replayed by capture: its scope's intermediates are released (the forward pass ``release_features``)."""

    def forward(self, sg):
        with sg.local_scope():
            sg.ndata["a"] = sg.ndata["h"] * 2
            sg.update_all(fn.copy_u("a", "m"), fn.sum("m", "b"))
            sg.ndata["c"] = sg.ndata["b"] + sg.ndata["h"]
            sg.update_all(fn.u_mul_e("c", "w", "m"), fn.sum("m", "d"))
            return sg.ndata["d"]


class _ScopedParentLayer(torch.nn.Module):
    def forward(self, g):
        with g.local_scope():
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "z"), etype="follows")
            return g.nodes["user"].data["z"]


@pytest.mark.parametrize("layer", [_Layer, _ScopedLayer])
def test_a_write_through_the_parent_between_compiled_calls_on_the_subgraph_is_seen(layer):
    g = _graph()
    sg = g.edge_type_subgraph(["follows"])
    eager, fast = layer(), gnnc.compile(layer())
    for step in range(3):
        g.nodes["user"].data["h"] = torch.randn(3, 2)  # the parent's features change between calls
        g.edges["follows"].data["w"] = torch.randn(2, 2)
        if step == 2:
            g.nodes["user"].data["h"].mul_(3)  # and in place
        with warnings.catch_warnings(), compiled.recording() as plans:
            warnings.simplefilter("error", gnnc.FallbackWarning)
            got = fast(sg)
        assert plans and all(p.module is not None for p in plans), "no compiled plan ran"
        torch.testing.assert_close(got, eager(sg))
        h, w = g.nodes["user"].data["h"], g.edges["follows"].data["w"]
        if layer is _Layer:
            torch.testing.assert_close(got[0], torch.stack([torch.zeros(2), h[0] * w[0], h[1] * w[1]]))
            torch.testing.assert_close(g.nodes["user"].data["out"], got[0])  # written into the parent's features
        else:
            assert "release_features" in fast.forward_log[0]  # the captured forward was replayed
            c = torch.stack([torch.zeros(2), 2 * h[0], 2 * h[1]]) + h
            torch.testing.assert_close(got, torch.stack([torch.zeros(2), c[0] * w[0], c[1] * w[1]]))
            assert not {"a", "b", "c", "d"} & set(g.nodes["user"].data)  # the scope's writes stayed in it
    g.nodes["user"].data["after"] = torch.ones(3, 1)  # compiled forwards on either graph leave them shared
    gnnc.compile(_ScopedParentLayer())(g)
    sg.ndata["back"] = torch.ones(3, 1)
    assert "after" in sg.ndata and "back" in g.nodes["user"].data
