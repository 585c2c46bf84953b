"""``gnnc.ops``: DGL's ``dgl.ops`` operators (gspmm, gsddmm, the segment operators, gather_mm, edge_softmax
with eids) with DGL 2.1's values and gradients. The literal numbers were printed by DGL 2.1 on the same
inputs (the peer environment's ``import dgl``)."""

import math
import warnings

import pytest
import torch

import gnnc
from gnnc import ops
from gnnc.compiler.driver import recording
from gnnc.graph.generators import rand_bipartite, rand_graph, seed
from gnnc.message_passing import compiling

INF = math.inf


def small():
    """4 nodes, edges 0->1, 1->2, 1->2, 2->0 (node 3 has no in-edge); x = arange, w = 1..4."""
    g = gnnc.graph(([0, 1, 1, 2], [1, 2, 2, 0]), num_nodes=4)
    x = torch.arange(8.0).view(4, 2).requires_grad_()
    w = torch.arange(1.0, 5.0).view(4, 1).requires_grad_()
    return g, x, w


# (op, reduce) -> (out, grad x, grad w) of the sum of out with its infinities zeroed (as DGL's test does), as
# DGL 2.1 gives them (None: no gradient)
DGL_SPMM = {
    ("add", "sum"): ([[8, 9], [1, 2], [9, 11], [0, 0]], [[1, 1], [2, 2], [1, 1], [0, 0]], [[2], [2], [2], [2]]),
    ("mul", "sum"): ([[16, 20], [0, 1], [10, 15], [0, 0]], [[1, 1], [5, 5], [4, 4], [0, 0]], [[1], [5], [5], [9]]),
    ("copy_rhs", "sum"): ([[4], [1], [5], [0]], None, [[1], [1], [1], [1]]),
    ("add", "max"): ([[8, 9], [1, 2], [5, 6], [-INF, -INF]], [[1, 1], [1, 1], [1, 1], [0, 0]], [[2], [0], [2], [2]]),
    ("mul", "max"): ([[16, 20], [0, 1], [6, 9], [-INF, -INF]], [[1, 1], [3, 3], [4, 4], [0, 0]], [[1], [0], [5], [9]]),
    ("copy_lhs", "max"): ([[4, 5], [0, 1], [2, 3], [-INF, -INF]], [[1, 1], [1, 1], [1, 1], [0, 0]], None),
    ("copy_rhs", "max"): ([[4], [1], [3], [-INF]], None, [[1], [0], [1], [1]]),
    ("add", "min"): ([[8, 9], [1, 2], [4, 5], [INF, INF]], [[1, 1], [1, 1], [1, 1], [0, 0]], [[2], [2], [0], [2]]),
    ("mul", "min"): ([[16, 20], [0, 1], [4, 6], [INF, INF]], [[1, 1], [2, 2], [4, 4], [0, 0]], [[1], [5], [0], [9]]),
    ("copy_rhs", "min"): ([[4], [1], [2], [INF]], None, [[1], [1], [0], [1]]),
    ("add", "mean"): ([[8, 9], [1, 2], [4.5, 5.5], [0, 0]], [[1, 1], [1, 1], [1, 1], [0, 0]], [[2], [1], [1], [2]]),
    ("mul", "mean"): (
        [[16, 20], [0, 1], [5, 7.5], [0, 0]],
        [[1, 1], [2.5, 2.5], [4, 4], [0, 0]],
        [[1], [2.5], [2.5], [9]],
    ),
    ("copy_lhs", "mean"): ([[4, 5], [0, 1], [2, 3], [0, 0]], [[1, 1], [1, 1], [1, 1], [0, 0]], None),
    ("copy_rhs", "mean"): ([[4], [1], [2.5], [0]], None, [[1], [0.5], [0.5], [1]]),
}


@pytest.mark.parametrize("op, reduce_op", list(DGL_SPMM))
def test_gspmm_matches_dgl(op, reduce_op):
    g, x, w = small()
    out = ops.gspmm(g, op, reduce_op, x, w)
    out.masked_fill(out.isinf(), 0).sum().backward()  # as DGL's test: the inf rows take no gradient
    want, grad_x, grad_w = DGL_SPMM[op, reduce_op]
    assert out.tolist() == want
    assert (x.grad.tolist() if x.grad is not None else None) == grad_x
    assert (w.grad.tolist() if w.grad is not None else None) == grad_w


def test_named_forms_are_gspmm_and_gsddmm():
    g, x, w = small()
    assert torch.equal(ops.u_add_e_max(g, x, w), ops.gspmm(g, "add", "max", x, w))
    assert torch.equal(ops.copy_u_mean(g, x), ops.gspmm(g, "copy_lhs", "mean", x, None))
    assert torch.equal(ops.copy_e_sum(g, w), ops.gspmm(g, "copy_rhs", "sum", None, w))
    assert torch.equal(ops.u_dot_v(g, x, x), ops.gsddmm(g, "dot", x, x, "u", "v"))
    assert torch.equal(ops.e_sub_v(g, w, x), ops.gsddmm(g, "sub", w, x, "e", "v"))
    assert torch.equal(ops.copy_u(g, x), x[[0, 1, 1, 2]]) and torch.equal(ops.copy_v(g, x), x[[1, 2, 2, 0]])
    assert ops.copy_e(g, w) is w
    assert len(ops.__all__) == len(set(ops.__all__)) == 64  # DGL's dgl.ops names, its submodules aside


def test_broadcast_shapes_as_dgl():
    g = gnnc.graph(([0, 1, 1, 2], [1, 2, 2, 0]), num_nodes=4)
    u, e = torch.rand(4, 1, 2, 1, 3, 1), torch.rand(4, 4, 1, 3, 1, 1)
    out = ops.gspmm(g, "mul", "sum", u, e)
    assert out.shape == (4, 4, 2, 3, 3, 1)
    want = torch.zeros(4, 4, 2, 3, 3, 1).index_add_(0, torch.tensor([1, 2, 2, 0]), u[[0, 1, 1, 2]] * e)
    torch.testing.assert_close(out, want)
    assert ops.gsddmm(g, "dot", torch.rand(4, 5, 3, 1, 7), torch.rand(4, 1, 3, 7, 7)).shape == (4, 5, 3, 7, 1)
    assert ops.gsddmm(g, "add", torch.rand(4, 3), torch.rand(4, 1), "u", "e").shape == (4, 3)
    with pytest.raises(ValueError, match="broadcast"):
        ops.gspmm(g, "add", "sum", torch.rand(4, 3), torch.rand(4, 2))


def test_edge_order_and_unibipartite_sides():
    """Edges given out of destination order (gnnc's internal order differs from the user's): edge operands
    and results stay in the user's order; operands of a uni-bipartite graph count each side's nodes."""
    src, dst = torch.tensor([2, 0, 1, 2, 0]), torch.tensor([1, 0, 3, 0, 2])
    g = gnnc.heterograph({("a", "r", "b"): (src, dst)}, num_nodes_dict={"a": 3, "b": 4})
    assert (g.num_src_nodes(), g.num_dst_nodes()) == (3, 4)  # DGL's sides, not all 7 nodes
    x, y, w = torch.rand(3, 2), torch.rand(4, 2), torch.rand(5, 2)
    torch.testing.assert_close(ops.gsddmm(g, "sub", x, w, "u", "e"), x[src] - w)
    torch.testing.assert_close(ops.gsddmm(g, "mul", w, y, "e", "v"), w * y[dst])
    torch.testing.assert_close(ops.copy_v(g, y), y[dst])
    torch.testing.assert_close(ops.gspmm(g, "div", "sum", x, w), torch.zeros(4, 2).index_add_(0, dst, x[src] / w))
    with pytest.raises(ValueError, match="one row per source node"):
        ops.copy_u_sum(g, torch.rand(7, 2))


def test_relation_slices_and_several_relations():
    g = gnnc.heterograph({("a", "r", "b"): ([0, 1], [1, 1]), ("b", "s", "a"): ([0, 1, 1], [0, 0, 1])})
    x = torch.rand(2, 3)
    torch.testing.assert_close(ops.copy_u_sum(g["s"], x), torch.stack([x[0] + x[1], x[1]]))
    with pytest.raises(ValueError, match=r"2 relations.*g\[etype\]"):
        ops.copy_u_sum(g, x)


def test_gspmm_refuses_what_dgl_refuses():
    g, x, w = small()
    with pytest.raises(ValueError, match="op must be one of"):
        ops.gspmm(g, "foo", "sum", x, w)
    with pytest.raises(ValueError, match="reduce_op must be one of"):
        ops.gspmm(g, "add", "prod", x, w)
    with pytest.raises(TypeError, match="floating point"):
        ops.copy_u_sum(g, torch.arange(4).view(4, 1))


def test_half_precision_keeps_dtype():
    g = gnnc.graph((torch.arange(900), torch.zeros(900, dtype=torch.int64)))
    f = torch.rand(900, 32)
    half = ops.copy_u_sum(g, f.bfloat16())
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), ops.copy_u_sum(g, f), rtol=4e-3, atol=2.0)  # DGL's own bound


def test_segment_reduce_and_softmax_match_dgl():
    seglen, value = torch.tensor([1, 0, 3]), torch.arange(4.0)
    assert ops.segment_reduce(seglen, value, "max").tolist() == [0, 0, 3]
    assert ops.segment_reduce(seglen, value, "mean").tolist() == [0, 0, 2]
    assert ops.segment_reduce(seglen, value).tolist() == [0, 0, 6]
    torch.testing.assert_close(ops.segment_softmax(seglen, value), torch.tensor([1.0, 0.0900306, 0.2447285, 0.6652410]))
    with pytest.raises(ValueError, match="sums to 4"):
        ops.segment_reduce(seglen, torch.arange(5.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_segment_mm_and_gather_mm_gradients(dtype):
    torch.manual_seed(0)
    a = torch.rand(20, 4, dtype=dtype, requires_grad=True)
    b = torch.rand(5, 4, 3, dtype=dtype, requires_grad=True)
    seglen = torch.tensor([6, 0, 9, 5, 0], dtype=torch.int32)
    want = torch.cat([a[lo : lo + n] @ b[i] for i, (lo, n) in enumerate(zip([0, 6, 6, 15, 20], seglen.tolist()))])
    torch.testing.assert_close(ops.segment_mm(a, b, seglen), want)
    idx = torch.randint(0, 5, (20,))
    got = ops.gather_mm(a, b, idx_b=idx)
    ref = torch.bmm(a.unsqueeze(1), b[idx]).squeeze(1)
    torch.testing.assert_close(got, ref)
    dc = torch.rand(20, 3, dtype=dtype)
    assert (
        torch.autograd.gradcheck(lambda a, b: ops.gather_mm(a, b, idx_b=idx), (a, b))
        if dtype == torch.float64
        else True
    )
    grads = torch.autograd.grad(got, (a, b), dc)
    torch.testing.assert_close(grads, torch.autograd.grad(ref, (a, b), dc))
    with pytest.raises(ValueError, match=r"idx_b must lie in \[0, 5\)"):
        ops.gather_mm(a, b, idx_b=idx + 1)


def test_edge_softmax_eids_matches_dgl():
    g = gnnc.graph(([0, 1, 2, 1, 3, 0], [1, 1, 2, 2, 2, 0]), num_nodes=4)
    eids = torch.tensor([4, 0, 3, 1])
    for norm_by, want, want_grad in (
        ("dst", [0.5825702, 0.4174298, 0.4174298, 0.5825702], [-0.4863642, -0.4863643, 0.4863643, 0.4863644]),
        ("src", [1.0, 1.0, 0.6607563, 0.3392436], [0.0, 0.0, -0.2241573, 0.2241575]),
    ):
        x = (torch.arange(6.0).view(6, 1) / 3)[eids].requires_grad_()
        out = ops.edge_softmax(g, x, eids=eids, norm_by=norm_by)
        (out * torch.arange(1.0, 5.0).view(4, 1)).sum().backward()
        torch.testing.assert_close(out.flatten(), torch.tensor(want))
        torch.testing.assert_close(x.grad.flatten(), torch.tensor(want_grad))
    assert ops.edge_softmax(g, torch.rand(2, 1), torch.tensor([1, 2], dtype=torch.int32)).flatten().tolist() == [1, 1]
    with pytest.raises(ValueError, match="len\\(eids\\)"):
        ops.edge_softmax(g, torch.rand(2, 1), eids=[1, 2, 3])
    with pytest.raises(ValueError, match="edge_softmax\\(eids\\)"):
        ops.edge_softmax(g, torch.rand(1, 1), eids=[6])


def test_ops_inside_a_compiled_model():
    """A compiled model calling the operators between compiled message passing: eager's numbers, and the
    message passing ran a compiled plan (no fallback)."""
    g, x, w = small()

    class Model(torch.nn.Module):
        def forward(self, g, x, w):
            g.ndata["h"] = ops.u_mul_e_sum(g, x, w)
            g.apply_edges(lambda edges: {"s": (edges.src["h"] * edges.dst["h"]).sum(-1)})
            a = ops.edge_softmax(g, g.edata["s"])
            return ops.copy_e_max(g, a.unsqueeze(-1)) + ops.segment_reduce(torch.tensor([2, 2]), x).sum()

    want = Model()(g, x.detach(), w.detach())
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = gnnc.compile(Model())(g, x.detach(), w.detach())
    assert any(plan.module is not None for plan in plans)
    torch.testing.assert_close(got, want)


def test_rand_graphs_are_seeded_and_distinct():
    seed(7)
    g = rand_graph(30, 100)
    src, dst = g.edges()
    assert g.num_nodes() == 30 and (src * 30 + dst).unique().numel() == 100
    seed(7)
    assert all(torch.equal(a, b) for a, b in zip(rand_graph(30, 100).edges(), (src, dst)))
    sparse = rand_graph(10_000, 50)
    assert (sparse.edges()[0] * 10_000 + sparse.edges()[1]).unique().numel() == 50
    b = rand_bipartite("_U", "_E", "_V", 30, 40, 300, idtype=torch.int32)
    assert (b.num_src_nodes(), b.num_dst_nodes(), b.num_edges(), b.idtype) == (30, 40, 300, torch.int32)
    with pytest.raises(ValueError, match="cannot draw 5 distinct edges"):
        rand_graph(2, 5)


def test_compiled_update_all_after_gspmm():
    """A DGL test's sequence: gspmm, then the same aggregation as a UDF under compile."""
    g, x, w = small()
    g.ndata["x"], g.edata["w"] = x.detach(), w.detach()
    with compiling({}), recording() as plans, warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        g.update_all(lambda e: {"m": e.src["x"] * e.data["w"]}, lambda n: {"v": n.mailbox["m"].max(1)[0]})
    assert plans and all(plan.module is not None for plan in plans)
    want = ops.u_mul_e_max(g, x.detach(), w.detach())
    torch.testing.assert_close(g.ndata["v"], want.masked_fill(want.isinf(), 0))
