"""Traversal frontiers and propagation along them (``gnnc.graph.traversal``, ``gnnc.propagate``),
against DGL 2.1's documented results and a tree-LSTM step written out in torch."""

import pytest
import torch

import gnnc

EXAMPLE = ([0, 1, 1, 2, 2, 3], [1, 2, 3, 3, 4, 5])  # DGL's docstring graph: 0 - 1 - 3 - 5, 1 - 2 - 4, 2 - 3


def _lists(frontiers):
    return [f.tolist() for f in frontiers]


def test_frontiers_are_dgls():
    g = gnnc.graph(EXAMPLE)
    assert _lists(gnnc.bfs_nodes_generator(g, 0)) == [[0], [1], [2, 3], [4, 5]]
    assert _lists(gnnc.bfs_edges_generator(g, 0)) == [[0], [1, 2], [4, 5]]
    assert _lists(gnnc.topological_nodes_generator(g)) == [[0], [1], [2], [3, 4], [5]]
    assert _lists(gnnc.topological_nodes_generator(g, reverse=True)) == [[4, 5], [3], [2], [1], [0]]
    assert _lists(gnnc.dfs_edges_generator(g, 0)) == [[0], [1], [3], [5], [4]]
    edges, labels = gnnc.dfs_labeled_edges_generator(g, 0, has_nontree_edge=True)
    assert (_lists(edges), _lists(labels)) == ([[0], [1], [3], [5], [4], [2]], [[0], [0], [0], [0], [0], [2]])


def test_dfs_from_two_sources_merges_their_steps():
    g = gnnc.graph(([0, 1, 0, 3, 3], [1, 2, 2, 4, 5]), num_nodes=6)
    edges, labels = gnnc.dfs_labeled_edges_generator(g, [0, 3], has_reverse_edge=True, has_nontree_edge=True)
    assert _lists(edges) == [[0, 3], [1, 3], [1, 4], [0, 4], [2]]
    assert _lists(labels) == [[0, 0], [0, 1], [1, 0], [1, 1], [2]]


def test_topological_order_refuses_a_cycle_and_a_heterograph():
    with pytest.raises(ValueError, match="has a cycle"):
        gnnc.topological_nodes_generator(gnnc.graph(([0, 1], [1, 0])))
    hg = gnnc.heterograph({("a", "x", "a"): ([0], [0]), ("a", "y", "a"): ([0], [0])})
    with pytest.raises(ValueError, match="supports graphs with one relation"):
        gnnc.bfs_nodes_generator(hg, 0)


def _path():
    """DGL's test graph: the undirected path 0 - 1 - 2 - 3 - 4, both directions."""
    return gnnc.graph(([0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]))


def _message(edges):
    return {"m": edges.src["x"]}


def _add(nodes):
    return {"x": nodes.data["x"] + nodes.mailbox["m"].sum(1)}


@pytest.mark.parametrize(
    "options, want",
    [
        ({}, [1, 2, 3, 4, 5]),
        ({"has_reverse_edge": True}, [1, 3, 5, 7, 9]),
        ({"has_nontree_edge": True}, [3, 5, 7, 9, 5]),
    ],
)
def test_propagation_along_dfs_edges(options, want):
    g = _path()
    g.ndata["x"] = torch.ones(5, 2)
    gnnc.prop_edges_dfs(g, 0, _message, _add, **options)
    assert g.ndata["x"][:, 0].tolist() == want


def test_propagation_along_bfs_layers():
    g = _path()
    g.ndata["x"] = torch.ones(5, 2)
    gnnc.prop_nodes_bfs(g, 0, _message, _add)
    assert g.ndata["x"][:, 0].tolist() == [2, 4, 6, 8, 9]


def test_child_sum_tree_lstm_along_topological_layers():
    """DGL's tree-LSTM example: children's states summed at each parent, leaves first."""
    torch.manual_seed(0)
    children, parents = [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 2, 2]
    g = gnnc.graph((torch.tensor(children), torch.tensor(parents)), num_nodes=7)
    u_iou, u_f = torch.nn.Linear(3, 9, bias=False), torch.nn.Linear(3, 3)

    def reduce(nodes):
        f = torch.sigmoid(u_f(nodes.mailbox["h"]))
        return {"iou": u_iou(nodes.mailbox["h"].sum(1)), "c": (f * nodes.mailbox["c"]).sum(1)}

    def cell(iou, c):
        i, o, u = torch.chunk(iou, 3, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + c
        return torch.sigmoid(o) * torch.tanh(c), c

    def apply(nodes):
        h, c = cell(nodes.data["iou"], nodes.data["c"])
        return {"h": h, "c": c}

    iou = torch.randn(7, 9)
    g.ndata.update({"iou": iou, "h": torch.zeros(7, 3), "c": torch.zeros(7, 3)})
    gnnc.prop_nodes_topo(g, lambda e: {"h": e.src["h"], "c": e.src["c"]}, reduce, apply_node_func=apply)
    h, c = cell(iou, torch.zeros(7, 3))  # leaves: their own iou, no children
    with torch.no_grad():
        for parent, kids in ((1, [3, 4]), (2, [5, 6]), (0, [1, 2])):
            box_h, box_c = h[kids], c[kids]
            ph, pc = cell(u_iou(box_h.sum(0, keepdim=True)), (torch.sigmoid(u_f(box_h)) * box_c).sum(0, keepdim=True))
            h[parent], c[parent] = ph[0], pc[0]
        torch.testing.assert_close(g.ndata["h"], h)
        torch.testing.assert_close(g.ndata["iou"], iou)  # the reduce's iou feeds the cell only


class ChildSumTreeLSTM(torch.nn.Module):
    """DGL's tree-LSTM example (child-sum cell), propagating leaves first with ``prop_nodes_topo``."""

    def __init__(self, h_size):
        super().__init__()
        self.U_iou = torch.nn.Linear(h_size, 3 * h_size, bias=False)
        self.U_f = torch.nn.Linear(h_size, h_size)
        self.b_iou = torch.nn.Parameter(torch.zeros(1, 3 * h_size))

    def message_func(self, edges):
        return {"h": edges.src["h"], "c": edges.src["c"]}

    def reduce_func(self, nodes):
        f = torch.sigmoid(self.U_f(nodes.mailbox["h"]))
        return {"iou": self.U_iou(torch.sum(nodes.mailbox["h"], 1)), "c": torch.sum(f * nodes.mailbox["c"], 1)}

    def apply_node_func(self, nodes):
        i, o, u = torch.chunk(nodes.data["iou"] + self.b_iou, 3, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + nodes.data["c"]
        return {"h": torch.sigmoid(o) * torch.tanh(c), "c": c}

    def forward(self, g, iou, h, c):
        g.ndata["iou"], g.ndata["h"], g.ndata["c"] = iou, h, c
        gnnc.prop_nodes_topo(g, self.message_func, self.reduce_func, apply_node_func=self.apply_node_func)
        return g.ndata.pop("h")


def test_compiled_tree_lstm_runs_each_frontiers_plan_and_matches_eager():
    import warnings

    from gnnc.compiler.driver import FallbackWarning, recording

    torch.manual_seed(1)
    children = torch.arange(1, 15)
    g = gnnc.graph((children, (children - 1) // 2), num_nodes=15)  # a complete binary tree, edges to parents
    model = ChildSumTreeLSTM(4).double()
    inputs = [torch.randn(15, 12, dtype=torch.float64, requires_grad=True)] + [
        torch.randn(15, 4, dtype=torch.float64) for _ in range(2)
    ]
    want = model(g, *inputs)
    want_grads = torch.autograd.grad(want.square().sum(), [inputs[0], *model.parameters()])
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        got = gnnc.compile(model)(g, *inputs)
    grads = torch.autograd.grad(got.square().sum(), [inputs[0], *model.parameters()])
    assert len(plans) == 3 and all(p.module is not None for p in plans)  # one pull per non-leaf layer
    torch.testing.assert_close(got, want)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b)
