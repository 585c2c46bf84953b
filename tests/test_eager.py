"""Eager executor against direct scatter formulas (written without gnnc)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnc
import gnnc.function as fn
from tests.graphs import random_heterograph, random_homograph

REDUCERS = {
    "sum": lambda box: box.sum(1),
    "mean": lambda box: box.mean(1),
    "max": lambda box: box.max(1).values,
    "min": lambda box: box.min(1).values,
}


def scatter_oracle(src, dst, x, n, how):
    """Aggregate x[src] at dst with plain torch; zero where nothing arrives."""
    m = x[src]
    out = torch.zeros((n,) + x.shape[1:], dtype=x.dtype)
    if how in ("sum", "mean"):
        out = out.index_add(0, dst, m)
        if how == "mean":
            deg = torch.bincount(dst, minlength=n).clamp(min=1).to(x.dtype)
            out = out / deg.view(-1, *([1] * (x.dim() - 1)))
        return out
    idx = dst.view(-1, *([1] * (x.dim() - 1))).expand_as(m)
    return out.scatter_reduce(0, idx, m, "amax" if how == "max" else "amin", include_self=False)


def softmax_oracle(src, dst, logits, values, n):
    """sum_u softmax_v(logits) * values[u], stable, with plain torch."""
    peak = torch.full((n,), -torch.inf, dtype=logits.dtype).scatter_reduce(0, dst, logits, "amax")
    w = torch.exp(logits - peak[dst])
    denom = torch.zeros(n, dtype=logits.dtype).index_add(0, dst, w)
    alpha = w / denom[dst]
    return torch.zeros((n,) + values.shape[1:], dtype=values.dtype).index_add(0, dst, alpha[:, None] * values[src])


graphs = st.builds(
    lambda n, m, seed: random_homograph(num_nodes=n, num_edges=m, seed=seed),
    st.integers(1, 14),
    st.integers(0, 40),
    st.integers(0, 10_000),
)


@settings(max_examples=40, deadline=None)
@given(g=graphs, how=st.sampled_from(sorted(REDUCERS)))
def test_builtin_and_udf_reducers_match_scatter(g, how):
    x = torch.randn(g.num_nodes(), 3, dtype=torch.float64)
    src, dst = g.find_edges()
    expected = scatter_oracle(src, dst, x, g.num_nodes(), how)
    g.ndata["h"] = x
    g.update_all(fn.copy_u("h", "m"), getattr(fn, how)("m", "builtin"))
    g.update_all(lambda e: {"m": e.src["h"]}, lambda nb: {"udf": REDUCERS[how](nb.mailbox["m"])})
    torch.testing.assert_close(g.ndata["builtin"], expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(g.ndata["udf"], expected, rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(g=graphs, scale=st.sampled_from([1.0, 1e4]))
def test_softmax_aggregation_matches_stable_oracle(g, scale):
    n = g.num_nodes()
    x = torch.randn(n, 2, dtype=torch.float64)
    score = torch.randn(n, dtype=torch.float64) * scale  # scale=1e4 overflows a naive exp
    src, dst = g.find_edges()
    expected = softmax_oracle(src, dst, score[src] + score[dst], x, n)
    g.ndata["x"], g.ndata["s"] = x, score

    def message(e):
        return {"e": e.src["s"] + e.dst["s"], "v": e.src["x"]}

    def reduce(nb):
        alpha = torch.softmax(nb.mailbox["e"], dim=1)
        return {"out": (alpha.unsqueeze(-1) * nb.mailbox["v"]).sum(1)}

    g.update_all(message, reduce)
    assert torch.isfinite(g.ndata["out"]).all()
    torch.testing.assert_close(g.ndata["out"], expected, rtol=1e-10, atol=1e-12)


def test_degree_buckets_feed_equal_degree_mailboxes_of_in_edges():
    g = random_homograph(num_nodes=10, num_edges=30, seed=4)
    src, dst = g.find_edges()
    g.ndata["id"] = torch.arange(10)
    seen = []

    def reduce(nb):
        box = nb.mailbox["src"]
        deg = g.in_degrees()[nb.nodes()]
        assert bool((deg == box.shape[1]).all())
        for v, row in zip(nb.nodes().tolist(), box.tolist()):
            assert sorted(row) == sorted(src[dst == v].tolist())
            seen.append(v)
        return {"n": box.sum(1)}

    g.update_all(lambda e: {"src": e.src["id"]}, reduce)
    assert sorted(seen) == torch.nonzero(g.in_degrees()).flatten().tolist()


def test_zero_in_degree_nodes_get_zeros_even_with_offset_reducer():
    g = gnnc.graph(([0, 0], [1, 1]), num_nodes=3)
    g.ndata["h"] = torch.ones(3, 2)
    g.update_all(fn.copy_u("h", "m"), lambda nb: {"r": nb.mailbox["m"].sum(1) + 100})
    assert g.ndata["r"].tolist() == [[0, 0], [102, 102], [0, 0]]


@pytest.mark.parametrize("compile", [False, True])
def test_graph_without_edges_never_calls_a_reduce_udf(compile):
    """As DGL: a reduce UDF is not called on nodes without in-edges, so a graph without edges gets no
    result from it (an update still runs); a built-in reducer gives zeros."""
    g = gnnc.graph(([], []), num_nodes=4)
    g.ndata["h"] = torch.randn(4, 3)
    calls = []

    def reduce(nodes):
        calls.append(nodes.batch_size())
        return {"r": nodes.mailbox["m"].sum(1).reshape(-1, 3)}

    g.update_all(lambda e: {"m": e.src["h"]}, reduce, compile=compile)
    assert calls == [] and sorted(g.ndata.keys()) == ["h"]
    g.update_all(lambda e: {"m": e.src["h"]}, reduce, lambda n: {"u": n.data["h"] + 1}, compile=compile)
    assert sorted(g.ndata.keys()) == ["h", "u"]
    g.update_all(fn.copy_u("h", "m"), fn.max("m", "mx"), compile=compile)
    assert torch.equal(g.ndata["mx"], torch.zeros(4, 3))


def test_gradients_flow_through_udfs():
    g = random_homograph(num_nodes=8, num_edges=20, seed=7)
    x = torch.randn(8, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)

    def run(x, w):
        with g.local_scope():
            g.ndata["h"] = x
            g.update_all(
                lambda e: {"m": torch.tanh(e.src["h"] @ w) * e.dst["h"]},
                lambda nb: {"r": torch.softmax(nb.mailbox["m"], 1).mul(nb.mailbox["m"]).sum(1)},
                lambda nb: {"o": nb.data["r"] * 2 + nb.data["h"]},
            )
            return g.ndata["o"]

    assert torch.autograd.gradcheck(run, (x, w))


@pytest.mark.parametrize("name", ["u_add_v", "u_sub_e", "e_mul_v", "u_div_e", "u_dot_v", "e_dot_u"])
def test_binary_builtins_match_manual(name):
    g = random_homograph(seed=5)
    src, dst = g.find_edges()
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    w = torch.rand(g.num_edges(), 4, dtype=torch.float64) + 0.5
    g.ndata["x"], g.edata["w"] = x, w
    sides = {"u": x[src], "v": x[dst], "e": w}
    lhs, op, rhs = name.split("_")
    ops = {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "dot": lambda a, b: (a * b).sum(-1, keepdim=True),
    }
    g.apply_edges(getattr(fn, name)("w" if lhs == "e" else "x", "w" if rhs == "e" else "x", "out"))
    torch.testing.assert_close(g.edata["out"], ops[op](sides[lhs], sides[rhs]))


def test_typed_lookups_pick_rows_by_type():
    g = random_heterograph(seed=6)
    g.ntype_data["a"] = torch.tensor([[1.0], [10.0], [100.0]])
    g.etype_data["b"] = torch.arange(5.0).unsqueeze(1) * 1000
    g.apply_edges(lambda e: {"v": e.srctype["a"] + 2 * e.dsttype["a"] + e.type["b"]})
    src, dst = g.find_edges()
    nt, rel = g.node_type_ids(), g.edge_type_ids()
    expected = g.ntype_data["a"][nt[src]] + 2 * g.ntype_data["a"][nt[dst]] + g.etype_data["b"][rel]
    assert torch.equal(g.edata_all["v"], expected)
    g.apply_nodes(lambda nb: {"t": nb.type["a"]})
    assert torch.equal(g.ndata_all["t"], g.ntype_data["a"][nt])


def test_heterograph_update_all_reduces_over_all_relations():
    g = random_heterograph(seed=8)
    n = g.num_nodes()
    x = torch.randn(n, dtype=torch.float64)
    src, dst = g.find_edges()
    g.ndata_all["x"] = x
    g.update_all(
        lambda e: {"e": e.src["x"] * e.dst["x"], "v": e.src["x"].unsqueeze(1)},
        lambda nb: {"o": (torch.softmax(nb.mailbox["e"], 1).unsqueeze(-1) * nb.mailbox["v"]).sum(1)},
    )
    torch.testing.assert_close(g.ndata_all["o"], softmax_oracle(src, dst, x[src] * x[dst], x.unsqueeze(1), n))


@pytest.mark.parametrize("cross", ["sum", "mean", "max", "min", "stack"])
def test_multi_update_all_cross_reducers(cross):
    g = random_heterograph(seed=9)
    x = torch.randn(g.num_nodes(), 2, dtype=torch.float64)
    g.ndata_all["h"] = x
    g.nodes["item"].data["out"] = torch.full((7, 2), 7.0, dtype=torch.float64)
    funcs = {
        "follows": (fn.copy_u("h", "m"), fn.sum("m", "out")),
        ("item", "liked_by", "user"): (
            lambda e: {"m": e.src["h"] * 2},
            lambda nb: {"out": nb.mailbox["m"].max(1).values},
        ),
        "empty": (fn.copy_u("h", "m"), fn.mean("m", "out")),
    }
    g.multi_update_all(funcs, cross)
    first_user = g.index.ntype_offsets[g.ntype_id("user")]
    users = slice(first_user, first_user + g.num_nodes("user"))
    per_rel = []
    relations = sorted(
        (("follows", "sum", 1), ("liked_by", "max", 2), ("empty", "mean", 1)), key=lambda item: g.etype_id(item[0])
    )  # DGL stacks in relation order
    for rel, how, mul in relations:
        r = g.etype_id(rel)
        s, d = g.find_edges()
        s, d = s[g.edge_type_ids() == r], d[g.edge_type_ids() == r]
        per_rel.append(scatter_oracle(s, d, x * mul, g.num_nodes(), how)[users])
    stacked = torch.stack(per_rel, 1)
    expected = {
        "sum": stacked.sum(1),
        "mean": stacked.mean(1),
        "max": stacked.max(1).values,
        "min": stacked.min(1).values,
        "stack": stacked,
    }[cross]
    torch.testing.assert_close(g.nodes["user"].data["out"], expected)
    # node types no relation in the dict targets keep their previous value
    assert bool((g.nodes["item"].data["out"] == 7.0).all())


def test_update_all_with_etype_writes_only_destination_type():
    g = random_heterograph(seed=10)
    g.ndata_all["h"] = torch.ones(g.num_nodes(), 1)
    g.update_all(fn.copy_u("h", "m"), fn.sum("m", "deg"), etype="likes")
    assert torch.equal(g.nodes["item"].data["deg"].flatten(), g.in_degrees(etype="likes").float())
    assert "deg" not in g.nodes["user"].data


def test_update_function_sees_reduced_data_and_node_data():
    g = random_homograph(seed=11)
    g.ndata["h"] = torch.randn(g.num_nodes(), 2)
    g.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"), lambda nb: {"o": nb.data["s"] - nb.data["h"]})
    assert "s" not in g.ndata  # as DGL: with an update, only its results are written
    s, d = g.find_edges()
    torch.testing.assert_close(g.ndata["o"], scatter_oracle(s, d, g.ndata["h"], g.num_nodes(), "sum") - g.ndata["h"])


# ------------------------------------------------------------------ errors
def test_message_must_return_dict():
    g = random_homograph()
    g.ndata["h"] = torch.ones(g.num_nodes())
    with pytest.raises(TypeError, match="must return a dict"):
        g.apply_edges(lambda e: e.src["h"])


def test_message_wrong_row_count():
    g = random_homograph()
    g.ndata["h"] = torch.ones(g.num_nodes())
    with pytest.raises(ValueError, match=r"returned 'm' with 12 rows; expected \d+ \(one per edge\)"):
        g.apply_edges(lambda e: {"m": g.ndata["h"]})


def test_udf_reading_missing_feature_names_it():
    g = random_homograph()
    with pytest.raises(KeyError, match=r"edges.src\['h'\]"):
        g.apply_edges(lambda e: {"m": e.src["h"]})


def test_bad_cross_reducer_and_relation():
    g = random_heterograph()
    g.ndata_all["h"] = torch.ones(g.num_nodes())
    with pytest.raises(ValueError, match="unknown cross reducer 'prod'"):
        g.multi_update_all({"likes": (fn.copy_u("h", "m"), fn.sum("m", "o"))}, "prod")
    with pytest.raises(KeyError, match="unknown relation 'nope'"):
        g.multi_update_all({"nope": (fn.copy_u("h", "m"), fn.sum("m", "o"))})
    with pytest.raises(KeyError, match="found no message 'x'"):
        g.update_all(fn.copy_u("h", "m"), fn.sum("x", "o"))


def test_builtin_broadcasts_feature_dims_like_dgl():
    g = random_homograph(seed=12)
    g.ndata["h"] = torch.randn(g.num_nodes(), 3, 4)
    g.edata["w"] = torch.rand(g.num_edges())
    g.edata["a"] = torch.rand(g.num_edges(), 3, 1)
    g.apply_edges(fn.u_mul_e("h", "w", "m1"))
    g.apply_edges(fn.u_mul_e("h", "a", "m2"))
    src, _ = g.find_edges()
    torch.testing.assert_close(g.edata["m1"], g.ndata["h"][src] * g.edata["w"].view(-1, 1, 1))
    torch.testing.assert_close(g.edata["m2"], g.ndata["h"][src] * g.edata["a"])


class _BuiltinExtremum(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.reduce = getattr(fn, op)

    def forward(self, g, x):
        g.ndata["h"] = x
        g.update_all(fn.copy_u("h", "m"), self.reduce("m", "o"))
        return g.ndata["o"]


@pytest.mark.parametrize("op", ["max", "min"])
def test_builtin_extremum_gradient_goes_to_the_first_tied_edge_as_in_dgl(op):
    # Node 2 receives equal values from nodes 0 and 1 (edge 0 first); node 0 from node 2.
    g = gnnc.graph((torch.tensor([1, 0, 2]), torch.tensor([2, 2, 0])), num_nodes=3)
    x = torch.tensor([[1.0, 3.0], [1.0, -3.0], [0.0, 0.0]], requires_grad=True)
    _BuiltinExtremum(op)(g, x).sum().backward()
    first = 0 if op == "max" else 1  # the feature where nodes 0 and 1 tie; the other has a strict winner
    want = torch.zeros(3, 2)
    want[1, first] = 1.0  # edge 0 (user order) comes from node 1
    want[0 if op == "max" else 1, 1 - first] = 1.0
    want[2] = 1.0
    torch.testing.assert_close(x.grad, want)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), op=st.sampled_from(["max", "min"]), backend=st.sampled_from(["torch", "cpu"]))
def test_builtin_extremum_with_ties_compiled_equals_eager(seed, op, backend):
    g = random_homograph(num_nodes=14, num_edges=50, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    x0 = torch.randint(-1, 2, (14, 3), generator=gen).double()  # few distinct values: ties everywhere
    model = _BuiltinExtremum(op)
    results = []
    for run in (model, gnnc.compile(model, backend=backend)):
        x = x0.clone().requires_grad_()
        out = run(g, x)
        (out * torch.linspace(-1, 2, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        results.append((out.detach(), x.grad))
    torch.testing.assert_close(results[1], results[0])


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min"])
def test_builtin_reducers_on_a_graph_without_edges_stay_attached_to_autograd(reducer):
    """Zeros for every node, and a loss on them backpropagates (zero gradients), for max / min as for
    sum / mean, eagerly and compiled alike (eager max / min used to return a tensor without a graph)."""
    for flag in (False, True):
        g = gnnc.graph((torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)), num_nodes=4)
        h = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
        g.ndata["h"] = h
        g.update_all(fn.copy_u("h", "m"), getattr(fn, reducer)("m", "o"), compile=flag)
        out = g.ndata["o"]
        assert out.requires_grad and torch.equal(out, torch.zeros_like(out))
        (grad,) = torch.autograd.grad(out.sum(), h)
        assert torch.equal(grad, torch.zeros_like(h))
