"""Deferred apply_edges results (cross-call fusion) against the eager executor.

A compiled whole-graph apply_edges whose result is an SDDMM of node tensors
it computed stores it unwritten; every way of reading it must see exactly
what eager apply_edges stores (user edge order), and a compiled update_all
that reads it fuses it into its aggregation.
"""

import contextlib
import warnings

import pytest
import torch

import gnnc
import gnnc.function as fn
from gnnc.compiler import driver as compiled
from gnnc.compiler.driver import FallbackWarning
from gnnc.data import npz
from gnnc.ir import operators as ops
from gnnc.message_passing import compiling
from gnnc.runtime.deferred import DeferredEdges, InternalOrderEdges
from tests.graphs import random_heterograph, random_homograph

BACKENDS = ["torch", "cpu"]


def _scores(edges):
    """GAT-style attention logits: per-node linear scores of both ends, added, leaky_relu."""
    s = (edges.src["z"] * edges.src["w"]).sum(-1, keepdim=True)
    d = (edges.dst["z"] * 2.0).sum(-1, keepdim=True)
    return {"e": torch.nn.functional.leaky_relu(s + d, 0.2)}


def _unsorted_graph():
    """Edges given out of destination order, so user and internal edge orders differ."""
    g = random_homograph(10, 30, seed=3)
    src, dst = g.edges()
    perm = torch.randperm(src.numel(), generator=torch.Generator().manual_seed(0))
    return gnnc.graph((src[perm], dst[perm]), num_nodes=g.num_nodes())


def _features(g, dtype=torch.float64):
    gen = torch.Generator().manual_seed(1)
    g.ndata["z"] = torch.randn(g.num_nodes(), 3, 4, generator=gen, dtype=dtype)
    g.ndata["w"] = torch.randn(g.num_nodes(), 3, 4, generator=gen, dtype=dtype)


def _eager_scores(g):
    with g.local_scope():
        g.apply_edges(_scores, compile=False)
        return g.edata["e"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_apply_edges_defers_and_reads_back_in_user_order(backend):
    g = _unsorted_graph()
    _features(g)
    want = _eager_scores(g)
    with gnnc.message_passing.compiling({"backend": backend}):
        g.apply_edges(_scores)
    assert isinstance(g._estore.peek_whole("e"), DeferredEdges)
    assert g.edata["e"].shape == want.shape
    torch.testing.assert_close(g.edata["e"], want, rtol=1e-12, atol=1e-12)
    assert g.edata["e"] is g.edata["e"]  # materialized once, then stored
    assert isinstance(g._estore.peek_whole("e"), torch.Tensor)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_consumer_matches_eager_forward_and_backward(backend):
    g = _unsorted_graph()
    _features(g)
    z = g.ndata["z"].clone().requires_grad_()

    def layer(compile_):
        with g.local_scope():
            g.ndata["z"] = z * 1.0
            g.apply_edges(_scores, compile=compile_)
            g.update_all(
                lambda e: {"m": e.src["z"], "e": e.data["e"]},
                lambda n: {"h": (torch.softmax(n.mailbox["e"], 1) * n.mailbox["m"]).sum(1)},
                compile=compile_,
            )
            return g.ndata["h"]

    want = layer(False)
    (want_grad,) = torch.autograd.grad((want * torch.linspace(0, 1, want.numel()).view_as(want)).sum(), z)
    with gnnc.message_passing.compiling({"backend": backend}), compiled.recording() as plans:
        got = layer(True)
    (got_grad,) = torch.autograd.grad((got * torch.linspace(0, 1, got.numel()).view_as(got)).sum(), z)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-9, atol=1e-12)
    assert any("sddmm_softmax_aggregate" in line for line in plans[-1].dfg.log)
    assert "e" not in g.edata  # the scope dropped the deferred value


def test_operands_aliasing_user_tensors_are_computed_at_once():
    """u_add_v of two node features: a later in-place change must not leak into the stored result."""
    g = _unsorted_graph()
    g.ndata["s"] = torch.randn(g.num_nodes(), 2, dtype=torch.float64)
    g.ndata["d"] = torch.randn(g.num_nodes(), 2, dtype=torch.float64)
    want = _eager_scores_of(g, lambda e: {"e": e.src["s"] + e.dst["d"]})
    g.apply_edges(lambda e: {"e": e.src["s"] + e.dst["d"]}, compile=True)
    g.ndata["s"].add_(100.0)
    torch.testing.assert_close(g.edata["e"], want)


def _eager_scores_of(g, udf):
    with g.local_scope():
        g.apply_edges(udf, compile=False)
        return g.edata["e"].clone()


def test_eager_consumer_and_other_blocks_materialize():
    g = random_heterograph(0)
    gen = torch.Generator().manual_seed(2)
    g.ndata_all["z"] = torch.randn(g.num_nodes(), 3, 4, generator=gen, dtype=torch.float64)
    g.ndata_all["w"] = torch.randn(g.num_nodes(), 3, 4, generator=gen, dtype=torch.float64)
    with g.local_scope():
        g.apply_edges(_scores, compile=False)
        want = {rel: g.edges[rel].data["e"] for rel in g.canonical_etypes}
        g.update_all(lambda e: {"m": e.data["e"]}, lambda n: {"h": n.mailbox["m"].sum(1)}, compile=False)
        want_h = g.ndata_all["h"]
    g.apply_edges(_scores, compile=True)
    assert isinstance(g._estore.peek_whole("e"), DeferredEdges)
    g.update_all(lambda e: {"m": e.data["e"]}, lambda n: {"h": n.mailbox["m"].sum(1)}, compile=False)
    torch.testing.assert_close(g.ndata_all["h"], want_h)
    for rel in g.canonical_etypes:  # one relation's view: a slice of the materialized whole
        torch.testing.assert_close(g.edges[rel].data["e"], want[rel])


def test_plan_depends_on_whether_the_input_is_deferred():
    g = _unsorted_graph()
    _features(g)
    reduce_udf = lambda n: {"h": n.mailbox["e"].max(1).values}
    message_udf = lambda e: {"e": e.data["e"]}
    with g.local_scope():
        g.apply_edges(_scores, compile=False)
        g.update_all(message_udf, reduce_udf, compile=False)
        want = g.ndata["h"]
    for materialize_first in (False, True, False):
        with g.local_scope():
            g.apply_edges(_scores, compile=True)
            if materialize_first:
                g.edata["e"]
            g.update_all(message_udf, reduce_udf, compile=True)
            torch.testing.assert_close(g.ndata["h"], want)


def test_saving_a_graph_materializes_deferred_features(tmp_path):
    g = _unsorted_graph()
    _features(g)
    want = _eager_scores(g)
    g.apply_edges(_scores, compile=True)
    path = tmp_path / "g.npz"
    npz.save_npz(g, path)
    torch.testing.assert_close(npz.load_npz(path).edata["e"], want)


# ----------------------------------------------------------------- other apply_edges results, internal order
def _products(edges):
    """Not an SDDMM of node tensors: stored in internal edge order until read."""
    return {"p": edges.src["z"] * edges.dst["w"] + edges.data["y"]}


def _aggregate(g, backend=None):
    """update_all reading ``p``: compiled with ``backend``, eager when None."""
    options = contextlib.nullcontext() if backend is None else compiling({"backend": backend})
    with options:
        g.update_all(
            lambda e: {"m": e.data["p"] * e.src["z"]},
            lambda nb: {"h": nb.mailbox["m"].sum(1)},
            compile=backend is not None,
        )
    return g.ndata["h"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_internal_order_result_feeds_a_compiled_call_unpermuted_and_reads_back_in_user_order(backend, monkeypatch):
    g = _unsorted_graph()
    _features(g)
    g.edata["y"] = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)
    with g.local_scope():
        g.apply_edges(_products, compile=False)
        want_p, want_h = g.edata["p"], _aggregate(g)
    with compiling({"backend": backend}):
        g.apply_edges(_products)
    assert isinstance(g._estore.peek_whole("p"), InternalOrderEdges)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        torch.testing.assert_close(_aggregate(g, backend), want_h)  # builds the plan
        permuted = []
        monkeypatch.setattr(
            g.index,
            "from_user_order",
            lambda x, *a: permuted.append(x) or type(g.index).from_user_order(g.index, x, *a),
        )
        torch.testing.assert_close(_aggregate(g, backend), want_h)
    assert not permuted  # the plan reads p in internal order as it is
    assert isinstance(g._estore.peek_whole("p"), InternalOrderEdges)
    torch.testing.assert_close(g.edata["p"], want_p, rtol=0, atol=0)
    assert isinstance(g._estore.peek_whole("p"), torch.Tensor)  # read once: stored in user order
    g.edata["p"].mul_(2)  # the user's in-place change is seen by the next compiled call
    with g.local_scope():
        g.edata["p"] = want_p * 2
        want_2 = _aggregate(g)
    torch.testing.assert_close(_aggregate(g, backend), want_2)


def test_internal_order_results_in_training_and_in_sorted_graphs():
    g = _unsorted_graph()
    _features(g)
    g.edata["y"] = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)
    grads = []
    for backend in (None, "torch"):
        z = g.ndata["z"].detach().clone().requires_grad_()
        options = contextlib.nullcontext() if backend is None else compiling({"backend": backend})
        with g.local_scope(), options:
            g.ndata["z"] = z
            g.apply_edges(_products, compile=backend is not None)
            out = _aggregate(g, backend).square().sum() + g.edata["p"].sum()
        grads.append(torch.autograd.grad(out, z)[0])
    torch.testing.assert_close(grads[1], grads[0])
    src, dst = g.edges()
    order = torch.sort(dst, stable=True).indices
    sorted_g = gnnc.graph((src[order], dst[order]), num_nodes=g.num_nodes())
    _features(sorted_g)
    sorted_g.edata["y"] = g.edata["y"][order]
    with compiling({"backend": "torch"}):
        sorted_g.apply_edges(_products)
    assert isinstance(sorted_g._estore.peek_whole("p"), torch.Tensor)  # nothing to permute


class _ParamScores(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))

    def scores(self, e):  # a bound method: its module's parameters are read in place, not bound as inputs
        return {"e": (e.src["z"] * self.a).sum(-1) + (e.dst["w"] * self.a).sum(-1)}

    def forward(self, g):
        g.apply_edges(self.scores)


def test_parameters_count_as_held_tensors_for_deferral(monkeypatch):
    """An optimizer changes parameters in place between calls: the plan's parameters are passed to ``wrap``
    with its inputs, and a deferred value whose operand is one of them is computed at once."""
    from gnnc.runtime import deferred as deferral

    model = _ParamScores()
    seen, real = [], deferral.wrap
    monkeypatch.setattr(
        deferral, "wrap", lambda deferred, ctx, held, *rest: seen.append(held) or real(deferred, ctx, held, *rest)
    )
    g = _unsorted_graph()
    _features(g)
    gnnc.compile(model)(g)
    assert seen and any(t is model.a for t in seen[0])
    n, _ = next(iter(compiled.plan_for("apply_edges", (lambda e: {"e": e.src["z"] * 1.0},), g).deferred.values()))
    assert n.target.__name__ == "gather_src"
    ctx = compiled.graph_context(g, None)
    rows = torch.nn.Parameter(torch.randn(g.num_nodes(), 2, dtype=torch.float64))  # a node-row operand
    out = real({"e": (n, None)}, ctx, [rows], {"e": (None, rows)}, "torch")
    assert isinstance(out["e"], torch.Tensor)  # computed: the parameter may change before a read
    assert isinstance(real({"e": (n, None)}, ctx, [], {"e": (None, rows)}, "torch")["e"], DeferredEdges)


# ----------------------------------------------------------------- order-free results read by user code
def test_which_plans_are_order_free():
    """Gathers of node rows, edge features and row-wise operators, and their sums, extrema and softmaxes by
    destination (generated loops and static kernels): any edge order. Not: a result left for the next call
    (deferred), random numbers (dropout draws by position), a per-edge tensor from the UDF's closure (bound
    in internal order), a relation's block, a reduce run by degree buckets."""
    g = _unsorted_graph()
    _features(g)
    g.edata["y"] = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)
    per_edge = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)

    def plan(*udfs, kind="apply_edges", graph=g, rel=None):
        return compiled.plan_for(kind, udfs, graph, rel)

    assert plan(_products).order_free
    assert "edge order: every edge is computed from its own rows alone" in "\n".join(plan(_products).dfg.log)
    assert plan(lambda e: {"q": torch.tanh(e.src["z"] - e.data["y"]).sum(-1)}).order_free
    assert not plan(_scores).order_free  # deferred
    assert not plan(lambda e: {"q": torch.nn.functional.dropout(e.src["z"], 0.5, True) * e.data["y"]}).order_free
    assert not plan(lambda e: {"q": e.src["z"] * per_edge}).order_free
    summed = plan(_products, lambda nb: {"h": nb.mailbox["p"].sum(1)}, None, kind="update_all")
    assert summed.order_free and "while more of its edge inputs are held in user order" in "\n".join(summed.dfg.log)
    assert plan(
        lambda e: {"m": e.data["y"] * e.src["z"]}, lambda nb: {"h": nb.mailbox["m"].sum(1)}, None, kind="update_all"
    ).order_free  # spmm
    assert plan(_products, lambda nb: {"h": nb.mailbox["p"].max(1).values}, None, kind="update_all").order_free
    assert not plan(  # by degree buckets: reads the internal order's groups
        _products, lambda nb: {"h": nb.mailbox["p"].sort(1).values[:, 0]}, None, kind="update_all"
    ).order_free
    hg = random_heterograph(seed=1)
    hg.ndata_all["z"] = torch.randn(hg.num_nodes(), 3, dtype=torch.float64)
    assert not plan(lambda e: {"q": e.src["z"] * 2.0}, graph=hg, rel=0).order_free


def _record_permutations(g, monkeypatch) -> list[str]:
    """The names of ``g.index``'s permutations of features from now on (the user-order context's own
    permutation of src and dst, once, is not counted)."""
    permuted: list[str] = []
    for name in ("from_user_order", "to_user_order"):
        real = getattr(type(g.index), name)

        def recorded(x, *a, _real=real, _name=name):
            if x.is_floating_point():
                permuted.append(_name)
            return _real(g.index, x, *a)

        monkeypatch.setattr(g.index, name, recorded)
    return permuted


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_order_free_result_read_by_user_code_runs_in_user_order_from_then_on(backend, monkeypatch):
    """The first call stores internal order (a compiled consumer would bind it as is); once user code reads
    it, the plan runs in the user's order: no permutation in or out, the same values and gradients as eager,
    and a compiled consumer of the user-order result still equals eager."""
    compiled.clear_cache()  # plans are shared: an earlier test's read would have switched this one already
    g = _unsorted_graph()
    _features(g)
    g.edata["y"] = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)
    z = g.ndata["z"].detach().requires_grad_()
    y = g.edata["y"].detach().requires_grad_()

    def step(backend):
        options = contextlib.nullcontext() if backend is None else compiling({"backend": backend})
        with g.local_scope(), options, compiled.recording() as plans, warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            g.ndata["z"], g.edata["y"] = z, y
            g.apply_edges(_products, compile=backend is not None)
            assert backend is None or (plans and plans[0].order_free), "the compiled apply_edges ran"
            stored = g._estore.peek_whole("p")
            p = g.edata["p"]  # read by user code
            h = _aggregate(g, backend)
        loss = p.square().sum() + h.sum()
        return stored, p, h, torch.autograd.grad(loss, [z, y])

    _, want_p, want_h, want_grads = step(None)
    first, *_ = step(backend)
    assert isinstance(first, InternalOrderEdges)  # not yet read: internal order
    permuted = _record_permutations(g, monkeypatch)
    stored, p, h, grads = step(backend)
    assert isinstance(stored, torch.Tensor) and not isinstance(stored, InternalOrderEdges)
    assert permuted == []  # neither apply_edges nor the update_all (an order-free spmm) permutes
    torch.testing.assert_close(p, want_p)
    torch.testing.assert_close(h, want_h)
    for got, want in zip(grads, want_grads):
        torch.testing.assert_close(got, want)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):  # as torch.utils.checkpoint sets
        hooked, *_ = step(backend)
    assert isinstance(hooked, InternalOrderEdges)  # a recomputation must save what its forward saved


def _gated(g, backend):
    """GatedGCN's aggregation (benchmarking-gnns): an edge value written in the message, summed twice."""

    def message(e):
        e_ij = e.data["y"] + e.src["z"] + e.dst["w"]
        e.data["e"] = e_ij
        return {"z_j": e.src["z"], "e_ij": e_ij}

    def reduce(nodes):
        sigma = torch.sigmoid(nodes.mailbox["e_ij"])
        return {"h": (sigma * nodes.mailbox["z_j"]).sum(1) / (sigma.sum(1) + 1e-6)}

    options = contextlib.nullcontext() if backend is None else compiling({"backend": backend})
    with options:
        g.update_all(message, reduce, compile=backend is not None)
    return g.ndata["h"], g.edata["e"]


def _hub_graph():
    """Node 0 takes most edges, self loops and repeated edges among them; nodes 5-7 take none; edges out of
    destination order."""
    src = torch.tensor([3, 0, 1, 4, 2, 0, 3, 3, 1, 4, 2, 2, 4])
    dst = torch.tensor([0, 0, 0, 1, 0, 2, 0, 0, 3, 4, 0, 1, 2])
    return gnnc.graph((src, dst), num_nodes=8)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("graph, scale", [(_unsorted_graph, 1.0), (_hub_graph, 1.0), (_hub_graph, 60.0)])
def test_an_order_free_update_all_with_user_order_edge_inputs_runs_in_user_order(backend, graph, scale, monkeypatch):
    """Edge features set by user code are in user order: the plan binds them and stores its edge write as
    they are, with no permutation, and equals eager in values and gradients (and in internal order, under
    saved-tensor hooks). On a random graph, and on one with a hub, self loops, multi-edges and nodes without
    in-edges, with gates saturated by large inputs."""
    compiled.clear_cache()
    g = graph()
    _features(g)
    y0 = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64) * scale
    z = g.ndata["z"].detach().requires_grad_()
    y = y0.requires_grad_()

    def step(backend):
        with g.local_scope(), compiled.recording() as plans, warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            g.ndata["z"], g.edata["y"] = z, y
            h, e = _gated(g, backend)
            assert backend is None or (plans and plans[0].order_free), "the compiled update_all ran"
            assert backend is None or any(n.target is ops.edge_expr_aggregate for n in plans[0].dfg.graph.nodes)
        loss = h.square().sum() + (e * e.detach()).sum()
        return h, e, torch.autograd.grad(loss, [z, y])

    want = step(None)
    step(backend)  # compiles (tracing runs the UDFs on internal-order views)
    permuted = _record_permutations(g, monkeypatch)
    got = step(backend)
    assert permuted == []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        hooked = step(backend)
    assert permuted == ["from_user_order", "to_user_order"]  # y in, e out
    for result in (got, hooked):
        torch.testing.assert_close(result[0], want[0])
        torch.testing.assert_close(result[1], want[1])
        for a, b in zip(result[2], want[2]):
            torch.testing.assert_close(a, b)


def _pair_logits_writing_an_edge(edges):
    edges.data["q"] = edges.data["y"] * 2.0
    return {"m": edges.src["z"], "l": torch.nn.functional.leaky_relu(edges.src["s"] + edges.dst["s"], 0.2)}


def _softmax_reduce(nodes):
    a = torch.softmax(nodes.mailbox["l"], 1)
    return {"h": (a * nodes.mailbox["m"]).sum(1)}


# (message, reduce, the aggregation the plan runs): DGL's built-ins and UDFs over edge features in user order
AGGREGATIONS = {
    "copy_e sum": (fn.copy_e("y", "m"), fn.sum("m", "h"), ops.segment_reduce),
    "copy_e mean": (fn.copy_e("y", "m"), fn.mean("m", "h"), ops.segment_reduce),
    "copy_e max": (fn.copy_e("y", "m"), fn.max("m", "h"), ops.segment_reduce),
    "u_mul_e sum": (fn.u_mul_e("z", "a", "m"), fn.sum("m", "h"), ops.spmm),
    "u_mul_e max": (fn.u_mul_e("z", "a", "m"), fn.max("m", "h"), ops.segment_reduce),
    "GCN-scaled sum": (
        lambda e: {"m": e.src["z"] * e.src["c"] * e.data["a"]},
        lambda nb: {"h": nb.mailbox["m"].sum(1) * nb.data["c"]},
        ops.scaled_spmm,
    ),
    "softmax of node-pair logits, edge write": (
        _pair_logits_writing_an_edge,
        _softmax_reduce,
        ops.sddmm_softmax_aggregate,
    ),
    "softmax of edge logits": (
        lambda e: {"m": e.src["z"], "l": e.data["a"] * 3.0},
        _softmax_reduce,
        ops.edge_softmax_aggregate,
    ),
    "softmax of edge logits, edge-weighted": (
        lambda e: {"m": e.src["z"] * e.data["a"], "l": e.data["a"] * 3.0},
        _softmax_reduce,
        ops.edge_softmax,
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("graph, scale", [(_unsorted_graph, 1.0), (_hub_graph, 1.0), (_hub_graph, 60.0)])
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_update_all_aggregations_run_in_user_order_on_user_order_edge_features(
    backend, graph, scale, aggregation, monkeypatch
):
    """Sums, means, extrema and softmaxes over edge features set by user code: the compiled plan runs the
    aggregation in the user's edge order with no permutation; its output equals the same plan's in internal
    order to the bit (a destination's edges are reduced in the same relative order), and eager's, gradients
    included. Ties of the extrema (integer-valued features, repeated edges of the hub) go to the edge eager
    picks."""
    compiled.clear_cache()
    message, reduce, target = AGGREGATIONS[aggregation]
    g = graph()
    _features(g)
    gen = torch.Generator().manual_seed(2)
    z = g.ndata["z"].detach().requires_grad_()
    y = (torch.randn(g.num_edges(), 3, 4, generator=gen, dtype=torch.float64) * scale).round().requires_grad_()
    a = (torch.rand(g.num_edges(), 3, 1, generator=gen, dtype=torch.float64) * scale).requires_grad_()
    c = (torch.rand(g.num_nodes(), 1, 1, generator=gen, dtype=torch.float64) * scale).requires_grad_()
    logit = (torch.randn(g.num_nodes(), 3, 1, generator=gen, dtype=torch.float64) * scale).requires_grad_()

    def step(backend):
        options = contextlib.nullcontext() if backend is None else compiling({"backend": backend})
        with g.local_scope(), options, compiled.recording() as plans, warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            g.ndata["z"], g.ndata["c"], g.ndata["s"], g.edata["y"], g.edata["a"] = z, c, logit, y, a
            g.update_all(message, reduce, compile=backend is not None)
            assert backend is None or (plans and plans[0].order_free), "the compiled update_all ran"
            assert backend is None or any(n.target is target for n in plans[0].dfg.graph.nodes)
            h = g.ndata["h"]
        return h, torch.autograd.grad((h * h.detach()).sum(), [z, y, a, c, logit], allow_unused=True)

    want = step(None)
    step(backend)  # compiles
    permuted = _record_permutations(g, monkeypatch)
    got = step(backend)
    assert permuted == []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        internal = step(backend)  # the same plan in internal order
    assert permuted and set(permuted) <= {"from_user_order", "to_user_order"}
    assert torch.equal(got[0], internal[0])
    torch.testing.assert_close(got[0], want[0])
    for x, w in zip(got[1], want[1]):
        if w is None:
            assert x is None or not x.any()
        else:
            torch.testing.assert_close(x, w)


def test_an_order_free_plan_reading_an_internal_order_result_stays_in_internal_order():
    """graphtransformer's edge layer copies an earlier compiled result (``e_out = score``) for user code to
    read: in user order the call would permute its input instead of its output, and leave the input for the
    next compiled call in user order too; it stays in internal order."""
    compiled.clear_cache()
    g = _unsorted_graph()
    _features(g)
    g.edata["y"] = torch.randn(g.num_edges(), 3, 4, dtype=torch.float64)
    copy = lambda e: {"q": e.data["p"] * 2.0}  # noqa: E731 - a UDF as published code writes it
    with g.local_scope():
        g.apply_edges(_products, compile=False)
        g.apply_edges(copy, compile=False)
        want = g.edata["q"]
    for _ in range(2):
        with g.local_scope(), compiling({"backend": "torch"}), compiled.recording() as plans:
            g.apply_edges(_products)
            g.apply_edges(copy)
            assert isinstance(g._estore.peek_whole("p"), InternalOrderEdges)
            assert isinstance(g._estore.peek_whole("q"), InternalOrderEdges)
            torch.testing.assert_close(g.edata["q"], want)  # user code reads q, not p
    assert [(p.order_free, p.read_in_user_order) for p in plans] == [(True, False), (True, True)]
