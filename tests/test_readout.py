"""DGL's readouts beyond the pools (``gnnc.readout``): top-k, edge softmax and broadcasts, per graph of a batch.

Expected numbers are DGL 2.1's on the same graphs and features.
"""

import pytest
import torch

import gnnc


def _batch(*more):
    """Two graphs, then ``more``: 2 nodes and 2 edges, 4 nodes and 3 edges."""
    b = gnnc.batch([gnnc.graph(([0, 1], [1, 0])), gnnc.graph(([0, 1, 2], [1, 2, 0]), num_nodes=4), *more])
    b.ndata["x"] = torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 7.0], [4.0, 1.0], [2.0, 2.0], [9.0, -1.0]])
    b.edata["e"] = torch.tensor([[1.0], [2.0], [3.0], [-4.0], [5.0]])
    return b


def test_topk_nodes_ranks_each_graph_by_a_column_or_every_column():
    b = _batch()
    values, ids = gnnc.topk_nodes(b, "x", 2, sortby=-1)
    assert values.tolist() == [[[1.0, 5.0], [3.0, 2.0]], [[0.0, 7.0], [2.0, 2.0]]] and ids.tolist() == [[0, 1], [0, 2]]
    values, ids = gnnc.topk_nodes(b, "x", 2, descending=False, sortby=0)
    assert values.tolist() == [[[1.0, 5.0], [3.0, 2.0]], [[0.0, 7.0], [2.0, 2.0]]] and ids.tolist() == [[0, 1], [0, 2]]
    values, ids = gnnc.topk_nodes(b, "x", 2)
    assert values.tolist() == [[[3.0, 5.0], [1.0, 2.0]], [[9.0, 7.0], [4.0, 2.0]]]
    assert ids.tolist() == [[[1, 0], [0, 1]], [[3, 0], [1, 2]]]
    values, ids = gnnc.topk_nodes(b, "x", 5, descending=False, sortby=-1)  # k past a graph's nodes: zero rows
    assert values.tolist() == [
        [[3.0, 2.0], [1.0, 5.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
        [[9.0, -1.0], [4.0, 1.0], [2.0, 2.0], [0.0, 7.0], [0.0, 0.0]],
    ]
    assert ids[0, :2].tolist() == [1, 0] and ids[1, :4].tolist() == [3, 1, 2, 0]


def test_topk_edges_and_a_graph_without_edges():
    b = _batch()
    values, ids = gnnc.topk_edges(b, "e", 2, sortby=0)
    assert values.tolist() == [[[2.0], [1.0]], [[5.0], [3.0]]] and ids.tolist() == [[1, 0], [2, 0]]
    values, ids = gnnc.topk_edges(b, "e", 3, descending=False)
    assert values.tolist() == [[[1.0], [2.0], [0.0]], [[-4.0], [3.0], [5.0]]]
    assert ids[0, :2].tolist() == [[0], [1]] and ids[1].tolist() == [[1], [0], [2]]
    empty = gnnc.batch([gnnc.graph(([0], [1])), gnnc.graph(([], []), num_nodes=2)])  # DGL's padding fails here
    empty.edata["e"] = torch.tensor([[2.0, 3.0]])
    assert gnnc.topk_edges(empty, "e", 2, sortby=1)[0].tolist() == [[[2.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]


def test_topk_gradient_reaches_the_chosen_rows_only():
    b = _batch()
    x = b.ndata["x"].clone().requires_grad_()
    b.ndata["x"] = x
    gnnc.topk_nodes(b, "x", 1, sortby=0)[0].sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]


def test_topk_refuses_what_dgl_cannot_rank():
    b = _batch()
    b.ndata["flat"], b.ndata["deep"] = torch.zeros(6), torch.zeros(6, 2, 2)
    b.ndata["int"] = torch.zeros(6, 2, dtype=torch.int64)
    for name in ("flat", "deep"):
        with pytest.raises(ValueError, match=rf"node feature '{name}' of shape \[N, D\]"):
            gnnc.topk_nodes(b, name, 1)
    with pytest.raises(TypeError, match="floating-point node feature 'int'"):
        gnnc.topk_nodes(b, "int", 1)


def test_softmax_edges_per_graph():
    b = _batch(gnnc.graph(([], []), num_nodes=0))
    torch.testing.assert_close(
        gnnc.softmax_edges(b, "e"),
        torch.tensor([[0.26894143], [0.7310586], [0.11918996], [0.00010868718], [0.88070136]]),
    )


def test_broadcast_edges_and_a_single_graphs_one_row():
    b = _batch()
    assert gnnc.broadcast_edges(b, torch.tensor([[1.0], [2.0]])).tolist() == [[1.0], [1.0], [2.0], [2.0], [2.0]]
    single = gnnc.graph(([0, 1], [1, 0]))
    for broadcast in (gnnc.broadcast_nodes, gnnc.broadcast_edges):  # DGL's deprecated (*) form: one row
        with pytest.warns(UserWarning, match="give graph_feat the shape"):
            assert broadcast(single, torch.tensor([1.0, 2.0])).tolist() == [[1.0, 2.0], [1.0, 2.0]]
    with pytest.warns(UserWarning):
        assert gnnc.broadcast_nodes(single, torch.tensor([[1.0], [2.0]])).shape == (2, 2, 1)


def test_readouts_of_one_type_of_a_heterogeneous_batch():
    one = gnnc.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0], [1])})
    two = gnnc.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0, 0], [0, 0])})
    b = gnnc.batch([one, two])
    b.nodes["a"].data["h"] = torch.tensor([[1.0], [2.0], [3.0]])
    b.edges["s"].data["w"] = torch.tensor([[1.0], [2.0], [3.0]])
    values, ids = gnnc.topk_nodes(b, "h", 1, ntype="a")
    assert values.tolist() == [[[2.0]], [[3.0]]] and ids.tolist() == [[[1]], [[0]]]
    torch.testing.assert_close(gnnc.softmax_edges(b, "w", etype="s"), torch.tensor([[1.0], [0.26894143], [0.7310586]]))
    assert gnnc.broadcast_edges(b, torch.tensor([[1.0], [2.0]]), etype=("b", "s", "a")).tolist() == [
        [1.0],
        [2.0],
        [2.0],
    ]
    with pytest.raises(ValueError, match="name the relation"):
        gnnc.broadcast_edges(b, torch.tensor([[1.0], [2.0]]))
