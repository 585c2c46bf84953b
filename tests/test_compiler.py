"""The MP-DFG compiler against the eager executor (the oracle), forward and backward."""

import re
import subprocess
import sys
import time
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnc
import gnnc.function as fn
from gnnc import models
from gnnc.backend import rebuild_in_backward as recompute
from gnnc.compiler import driver as compiled
from gnnc.ir import cost
from gnnc.ir.context import graph_context
from tests.graphs import random_heterograph, random_homograph


def _homo_graphs():
    return [random_homograph(12, 40, seed) for seed in (0, 1)] + [
        gnnc.graph(([0], [0]), num_nodes=1),
        gnnc.graph(([], []), num_nodes=5),
    ]


def _hetero_graphs():
    return [random_heterograph(seed) for seed in (0, 1)] + [random_homograph(10, 30, 2)]


HOMO = {
    "gcn": lambda: models.GCNConv(5, 4),
    "gat": lambda: models.GATConv(5, 3, 2),
    "gcnn": lambda: models.GCNNConv(5, 3),
    "edgeconv": lambda: models.EdgeConv(5, 4),
    "monet": lambda: models.GMMConv(5, 4, 2, 3),
    "monet_max": lambda: models.GMMConv(5, 4, 2, 3, aggregator="max"),
}
HETERO = {
    "rgcn": lambda n: models.RGCNConv(4, 3, n),
    "rgcn_bases": lambda n: models.RGCNConv(4, 3, n, num_bases=2),
    "rgat": lambda n: models.RGATConv(4, 3, n, num_heads=2),
    "hgt": lambda n: None,
    "simple_hgn": lambda n: models.SimpleHGNConv(4, 3, n, 2, 2),
}


def _inputs(name, g, dtype, scale=1.0):
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(g.num_nodes(), 5, generator=gen, dtype=dtype) * scale).requires_grad_()
    if name == "gcnn":
        return [x, torch.randn(g.num_edges(), 3, generator=gen, dtype=dtype)]
    if name.startswith("monet"):
        return [x, torch.rand(g.num_edges(), 2, generator=gen, dtype=dtype)]
    return [x]


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def assert_compiled_matches_eager(model, g, inputs, rtol, atol, **options):
    """Forward values and gradients of every parameter and input agree; no fallback. ``options`` go to
    ``gnnc.compile`` (passes switched off)."""
    model.eval()
    eager_out = _outputs(model(g, *inputs))
    eager_loss = sum((o * torch.linspace(0.5, 1.5, o.numel(), dtype=o.dtype).view_as(o)).sum() for o in eager_out)
    params = [p for p in model.parameters()] + [x for x in inputs if x.requires_grad]
    eager_grads = torch.autograd.grad(eager_loss, params, allow_unused=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        comp_out = _outputs(gnnc.compile(model, **options)(g, *inputs))
    comp_loss = sum((o * torch.linspace(0.5, 1.5, o.numel(), dtype=o.dtype).view_as(o)).sum() for o in comp_out)
    comp_grads = torch.autograd.grad(comp_loss, params, allow_unused=True)
    for e, c in zip(eager_out, comp_out):
        torch.testing.assert_close(c, e, rtol=rtol, atol=atol)
    for e, c in zip(eager_grads, comp_grads):
        if e is None and c is None:  # e.g. attention weights on a graph without edges
            continue
        e = torch.zeros_like(c) if e is None else e
        c = torch.zeros_like(e) if c is None else c
        torch.testing.assert_close(c, e, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(HOMO))
@pytest.mark.parametrize("gi", range(4))
def test_homogeneous_models_compile_exactly(name, gi):
    torch.manual_seed(gi)
    g = _homo_graphs()[gi]
    model = HOMO[name]().double()
    assert_compiled_matches_eager(model, g, _inputs(name, g, torch.float64), 1e-6, 1e-9)


@pytest.mark.parametrize("name", sorted(HETERO))
@pytest.mark.parametrize("gi", range(3))
def test_heterogeneous_models_compile_exactly(name, gi):
    torch.manual_seed(gi)
    g = _hetero_graphs()[gi]
    model = _hetero_model(name, g)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert_compiled_matches_eager(model, g, [x], 1e-6, 1e-9)


def _hetero_model(name, g):
    n_rels, n_types = len(g.canonical_etypes), len(g.ntypes)
    return (models.HGTConv(4, 4, n_types, n_rels, 2) if name == "hgt" else HETERO[name](n_rels)).double()


@pytest.mark.parametrize("name", sorted(HETERO))
@pytest.mark.parametrize(
    "off", ["compact", "linear_reorder", "reorder", "fuse", "split_concat", "typed_linear", "recompute"]
)
def test_heterogeneous_models_match_eager_with_each_optimization_off(name, off):
    g = random_heterograph(3)
    torch.manual_seed(3)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert_compiled_matches_eager(_hetero_model(name, g), g, [x], 1e-6, 1e-9, **{off: False})


@pytest.mark.parametrize("name", sorted(HOMO) + sorted(HETERO))
def test_models_match_eager_with_every_marked_value_rebuilt_in_backward(name, monkeypatch):
    monkeypatch.setattr(recompute, "MIN_SHARE", 0)
    rebuilt = []
    monkeypatch.setattr(recompute, "_rebuilt", lambda note, f=recompute._rebuilt: rebuilt.append(note) or f(note))
    if name in HOMO:
        g = _homo_graphs()[0]
        model, inputs = HOMO[name]().double(), _inputs(name, g, torch.float64)
    else:
        g = random_heterograph(2)
        torch.manual_seed(2)
        model, inputs = _hetero_model(name, g), [torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)]
    assert_compiled_matches_eager(model, g, inputs, 1e-6, 1e-9)
    if name == "hgt":  # k, q, v and the update's GELU and linear are rebuilt, not kept
        assert len(rebuilt) >= 5


@pytest.mark.parametrize("backend", ["torch", "cpu"])
@pytest.mark.parametrize("name", sorted(HOMO) + sorted(HETERO))
def test_second_order_gradients_stop_with_a_clear_error_never_silently_wrong(name, backend):
    # The kernels' backward is not differentiable: gradients of gradients would miss their terms.
    if name in HOMO:
        g = _homo_graphs()[0]
        model, inputs = HOMO[name]().double(), _inputs(name, g, torch.float64)
    else:
        g = random_heterograph(2)
        model, inputs = _hetero_model(name, g), [torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)]
    out = _outputs(gnnc.compile(model, backend=backend)(g, *inputs))[0]
    with pytest.raises(RuntimeError, match="second-order gradients .* cannot go through a compiled"):
        torch.autograd.grad(out.pow(2).sum(), inputs[0], create_graph=True)


@pytest.mark.parametrize("name", sorted(HETERO))
def test_heterogeneous_models_match_eager_with_one_pair_per_edge(name, monkeypatch):
    monkeypatch.setattr(cost, "compacts", lambda num_edges, num_pairs: False)  # identity pair tables
    g = random_heterograph(4)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert graph_context(g, None).src_pairs.identity
    assert_compiled_matches_eager(_hetero_model(name, g), g, [x], 1e-6, 1e-9)


def _forcing(monkeypatch, estimate: str, name: str) -> list:
    """Make the cost model's ``estimate`` function pick ``name``; returns the list of names ``cost.choose``
    then returned (so a test sees that the forced candidate really ran)."""
    monkeypatch.setattr(cost, estimate, lambda *args, **kw: ([], name))
    ran, real = [], cost.choose
    monkeypatch.setattr(cost, "choose", lambda *args: ran.append(real(*args)) or ran[-1])
    return ran


@pytest.mark.parametrize("order", [cost.TRANSFORM_FIRST, cost.AGGREGATE_FIRST])
@pytest.mark.parametrize("gi", range(3))
@pytest.mark.parametrize("bases", [None, 2])
def test_rgcn_matches_eager_in_either_aggregation_order(order, gi, bases, monkeypatch):
    ran = _forcing(monkeypatch, "typed_aggregation", order)
    g = _hetero_graphs()[gi]
    torch.manual_seed(gi)
    model = models.RGCNConv(4, 3, len(g.canonical_etypes), num_bases=bases).double()
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert_compiled_matches_eager(model, g, [x], 1e-6, 1e-9)
    assert ran and set(ran) == {order}


@pytest.mark.parametrize("side", [cost.BY_SOURCE, cost.BY_DESTINATION])
@pytest.mark.parametrize("gi", range(3))
def test_hgt_matches_eager_with_the_relation_matrix_on_either_side(side, gi, monkeypatch):
    ran = _forcing(monkeypatch, "typed_dot", side)
    g = _hetero_graphs()[gi]
    torch.manual_seed(gi)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert_compiled_matches_eager(_hetero_model("hgt", g), g, [x], 1e-6, 1e-9)
    assert ran and set(ran) == {side}


def test_autotune_times_each_candidate_once_per_graph_and_keeps_the_fastest():
    class Block:
        pass

    calls = []

    def run(name, delay):
        def go():
            calls.append(name)
            time.sleep(delay)

        return go

    block, runs = Block(), {"slow": run("slow", 0.05), "fast": run("fast", 0.0)}
    assert cost.choose(block, "k", "slow", runs) == "slow"  # no autotune: the estimate
    with cost.autotuning(True):
        assert cost.choose(block, "k", "slow", runs) == "fast"
        assert cost.choose(block, "k", "slow", runs) == "fast"
    assert sorted(calls) == ["fast", "slow"]


@pytest.mark.parametrize("name", ["rgcn", "hgt"])
def test_autotuned_models_match_eager(name):
    g = random_heterograph(2)
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert_compiled_matches_eager(_hetero_model(name, g), g, [x], 1e-6, 1e-9, autotune=True)
    tuned = graph_context(g, None).__dict__["_autotuned"]
    assert len(tuned) == 1 and next(iter(tuned.values())) in (
        cost.TRANSFORM_FIRST,
        cost.AGGREGATE_FIRST,
        cost.BY_SOURCE,
        cost.BY_DESTINATION,
    )
    text = gnnc.explain(_hetero_model(name, g), g, x.detach(), autotune=True)
    assert f"* {next(iter(tuned.values()))}" in text  # explain marks the measured choice


def test_compiling_draws_nothing_from_the_random_stream():
    """Shape propagation runs dropout on stand-in rows; the first (compiling) call and a cached call of a
    training-mode model must leave the global generator in the same state (else dropout masks, and so
    training runs, depend on how many passes re-annotate the graph)."""
    g = random_homograph(12, 40, 0)
    model = models.GATConv(5, 3, 2, attn_drop=0.5).train()
    compiled_model = gnnc.compile(model)
    x = torch.randn(g.num_nodes(), 5)
    after = []
    for _ in range(2):  # first call compiles, second reuses the plan
        torch.manual_seed(5)
        compiled_model(g, x)
        after.append(torch.rand(3))
    torch.testing.assert_close(after[0], after[1], rtol=0, atol=0)


def test_cost_model_prefers_the_order_with_fewer_pairs_to_transform():
    few_dst = cost.typed_aggregation(num_edges=10_000, src_pairs=9_000, dst_pairs=500, k=64, m=64)
    few_src = cost.typed_aggregation(num_edges=10_000, src_pairs=500, dst_pairs=9_000, k=64, m=64)
    assert few_dst[1].startswith("aggregate") and few_src[1].startswith("transform")
    assert [c.name for c in few_dst[0]] == [c.name for c in few_src[0]]
    assert cost.pair_table(1000, 300, 8, 8)[1] == "compact" and cost.pair_table(1000, 950, 8, 8)[1] == "per edge"
    assert cost.typed_dot(1000, 900, 100, 2, 8)[1].startswith("destination")
    assert cost.typed_dot(1000, 100, 900, 2, 8)[1].startswith("source")


def test_explain_shows_the_cost_models_candidates_and_choice():
    g = random_heterograph(1)
    model = models.RGCNConv(4, 3, len(g.canonical_etypes))
    text = gnnc.explain(model, g, torch.randn(g.num_nodes(), 4))
    assert "-- cost model on this graph (* chosen):" in text
    lines = text.splitlines()
    at = lines.index("-- cost model on this graph (* chosen):")
    candidates = [line for line in lines[at + 2 : at + 4]]
    assert sum(line.lstrip().startswith("*") for line in candidates) == 1
    assert all("FLOPs" in line and "bytes" in line for line in candidates)


@pytest.mark.parametrize("name", ["gat", "gcn", "edgeconv"])
def test_float32_within_1e4(name):
    g = random_homograph(30, 120, 3)
    assert_compiled_matches_eager(HOMO[name](), g, _inputs(name, g, torch.float32), 1e-4, 1e-5)


@pytest.mark.parametrize("name", ["gat"])
def test_large_attention_logits(name):
    g = random_homograph(12, 40, 4)
    model = HOMO[name]().double()
    inputs = _inputs(name, g, torch.float64, scale=1e3)
    assert_compiled_matches_eager(model, g, inputs, 1e-6, 1e-6)


def test_large_logits_heterogeneous():
    g = random_heterograph(5)
    model = models.RGATConv(4, 3, len(g.canonical_etypes), num_heads=2).double()
    x = (torch.randn(g.num_nodes(), 4, dtype=torch.float64) * 1e3).requires_grad_()
    assert_compiled_matches_eager(model, g, [x], 1e-6, 1e-6)


def test_plan_reused_for_new_graph_of_same_schema():
    compiled.clear_cache()
    model = models.GATConv(5, 3, 2).eval()
    c = gnnc.compile(model)
    c(random_homograph(12, 40, 0), torch.randn(12, 5))
    size = len(compiled._CACHE)
    g2, x2 = random_homograph(20, 70, 1), torch.randn(20, 5)
    out = c(g2, x2)
    assert len(compiled._CACHE) == size
    torch.testing.assert_close(out, model(g2, x2))


def test_parameters_stay_live_through_training_steps():
    g = random_homograph(12, 40, 5)
    x = torch.randn(12, 5)
    model = models.GATConv(5, 3, 2)
    c = gnnc.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        c(g, x).pow(2).sum().backward()
        opt.step()
        torch.testing.assert_close(c(g, x), model(g, x))


def test_compile_flag_on_a_single_call():
    g = random_homograph(12, 40, 6)
    g.ndata["h"] = torch.randn(12, 3)
    g.update_all(fn.copy_u("h", "m"), fn.max("m", "eager"))
    g.update_all(fn.copy_u("h", "m"), fn.max("m", "comp"), compile=True)
    torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])


def test_multi_update_all_compiled():
    g = random_heterograph(7)
    g.ndata_all["h"] = torch.randn(g.num_nodes(), 2, dtype=torch.float64)
    funcs = {
        "follows": (lambda e: {"m": torch.tanh(e.src["h"])}, lambda nb: {"o": nb.mailbox["m"].sum(1)}),
        "liked_by": (fn.copy_u("h", "m"), fn.mean("m", "o")),
    }
    g.multi_update_all(funcs, "sum")
    eager = g.nodes["user"].data["o"]
    g.multi_update_all(funcs, "sum", compile=True)
    torch.testing.assert_close(g.nodes["user"].data["o"], eager)


# ------------------------------------------------------------------ fallback
def test_data_dependent_control_flow_falls_back_with_one_warning():
    g = random_homograph(12, 40, 8)
    g.ndata["h"] = torch.randn(12, 3)

    def message(e):
        if e.src["h"].sum() > 0:  # data-dependent branch
            return {"m": e.src["h"]}
        return {"m": -e.src["h"]}

    g.update_all(message, fn.sum("m", "eager"))
    with pytest.warns(gnnc.FallbackWarning, match="control flow") as record:
        g.update_all(message, fn.sum("m", "comp"), compile=True)
        g.update_all(message, fn.sum("m", "comp"), compile=True)
    assert len(record) == 1 and "test_compiler.py" in str(record[0].message)
    torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])


@pytest.mark.parametrize(
    "message, reduce",
    [
        (fn.copy_u("label", "m"), fn.sum("m", "out")),
        (lambda e: {"m": e.src["label"] * 2}, lambda n: {"out": n.mailbox["m"].max(1).values}),
        (lambda e: {"m": e.src["label"] + e.dst["label"]}, lambda n: {"out": n.mailbox["m"].sum(1)}),
    ],
    ids=["builtin_sum", "udf_max", "udf_u_add_v_sum"],
)
def test_integer_messages_fall_back_once_with_the_fix_named(message, reduce):
    """Label counting: the primitives compute in floating point; the plan falls back when it is built (one
    warning, cached), never compiling again on every call."""
    g = random_homograph(12, 40, 8)
    g.ndata["label"] = torch.randint(0, 5, (12,))
    g.update_all(message, reduce)
    eager = g.ndata["out"]
    with pytest.warns(gnnc.FallbackWarning, match=r"of int64 values .*\.float\(\) the feature") as record:
        for _ in range(3):
            g.update_all(message, reduce, compile=True)
            assert torch.equal(g.ndata["out"], eager)
    assert len(record) == 1


def _norm_if_present(e):
    m = e.src["h"]
    if "norm" in e.data:  # DGL's RelGraphConv, GraphConv examples
        m = m * e.data["norm"]
    return {"m": m}


def _by_dtype_and_rank(e):
    h = e.src["h"]
    if h.dtype == torch.int64 and len(h.shape) == 1:  # DGL's bmm_maybe_select: ids index an embedding
        return {"m": EMBEDDING[h]}
    if h.dim() == 3:
        return {"m": h.sum(1) * h.shape[1]}
    return {"m": h * h.size(-1)}


EMBEDDING = torch.randn(12, 3)


@pytest.mark.parametrize("udf", [_norm_if_present, _by_dtype_and_rank])
def test_branches_on_features_present_and_their_dtype_or_rank_compile_per_graph(udf):
    """The trace is specialized on the graph's features: each graph takes its own branch, none falls back."""
    graphs = []
    for i, h in enumerate([torch.randn(12, 3), torch.randn(12, 3), torch.randn(12, 2, 3), torch.arange(12) % 12]):
        g = random_homograph(12, 40, 20 + i)
        g.ndata["h"] = h
        if i == 1:
            g.edata["norm"] = torch.rand(g.num_edges(), 1)
        graphs.append(g)
    for g in graphs + graphs:  # the second round reuses each graph's plan
        if udf is _norm_if_present and g.ndata["h"].dtype == torch.int64:
            continue
        g.update_all(udf, fn.sum("m", "eager"))
        with warnings.catch_warnings():
            warnings.simplefilter("error", gnnc.FallbackWarning)
            g.update_all(udf, fn.sum("m", "comp"), compile=True)
        torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])


def _draws_sized_by_the_batch(e):
    h = e.src["h"]
    return {"m": torch.rand(h.shape[0], 2).floor() + h[:, :2]}  # draws in [0, 1): zeros


def _masked_write(e):
    h = e.src["h"] * 1
    h[h < 0] = 0
    return {"m": h}


@pytest.mark.parametrize("udf, hint", [(_draws_sized_by_the_batch, "h.shape[0]"), (_masked_write, "x[mask] = ...")])
def test_untraceable_idioms_fall_back_with_a_message_in_the_users_terms(udf, hint):
    g = random_homograph(12, 40, 30)
    g.ndata["h"] = torch.randn(12, 3)
    g.update_all(udf, fn.sum("m", "eager"))
    with pytest.warns(gnnc.FallbackWarning, match=re.escape(hint)):
        g.update_all(udf, fn.sum("m", "comp"), compile=True)
    torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])


def _cumulative(x):
    return torch.cumsum(x, dim=-1)


def test_unregistered_operator_falls_back_then_register_rule_compiles():
    g = random_homograph(12, 40, 9)
    g.ndata["h"] = torch.randn(12, 3)
    message = lambda e: {"m": torch.special.i0e(e.src["h"])}  # elementwise, but no rule knows it
    g.update_all(message, fn.sum("m", "eager"))
    with pytest.warns(gnnc.FallbackWarning, match="i0e"):
        g.update_all(message, fn.sum("m", "comp"), compile=True)
    torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])
    gnnc.register_rule(torch.special.i0e, lambda node, res: ("Dense", next((r for r in res if r != "S"), "S")))
    compiled.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        g.update_all(message, fn.sum("m", "comp2"), compile=True)
    torch.testing.assert_close(g.ndata["comp2"], g.ndata["eager"])


def test_reduce_over_all_rows_is_rejected_not_miscompiled():
    g = random_homograph(12, 40, 10)
    g.ndata["h"] = torch.randn(12, 3)
    message = lambda e: {"m": e.src["h"] - e.src["h"].mean(0)}  # mixes edges: not a Dense row op
    g.update_all(message, fn.sum("m", "eager"))
    with pytest.warns(gnnc.FallbackWarning, match="dim 0"):
        g.update_all(message, fn.sum("m", "comp"), compile=True)
    torch.testing.assert_close(g.ndata["comp"], g.ndata["eager"])


ROW_INDEXINGS = {
    "permuted_rows": lambda perm: lambda e: {"m": e.src["h"][perm]},
    "index_select_rows": lambda perm: lambda e: {"m": e.src["h"].index_select(0, perm)},
    "first_row": lambda perm: lambda e: {"m": e.src["h"] * e.src["h"][0]},
    "rows_of_a_slice": lambda perm: lambda e: {"m": e.data["w"][perm, :2]},
}


@pytest.mark.parametrize("form", sorted(ROW_INDEXINGS))
def test_indexing_the_rows_of_graph_data_falls_back_never_miscompiles(form):
    """Edge rows picked by a tensor or a number move rows: the plan would pick them in its own edge order
    (and reorder pushed the index onto node rows), so the call runs eagerly; many nodes keep the indices in
    range, where a miscompiled plan would not fail."""
    g = random_homograph(100, 80, 11)
    g.ndata["h"] = torch.randn(100, 3)
    g.edata["w"] = torch.randn(g.num_edges(), 3)
    message = ROW_INDEXINGS[form](torch.randperm(g.num_edges(), generator=torch.Generator().manual_seed(0)))
    g.apply_edges(message)
    want = g.edata["m"]
    with pytest.warns(gnnc.FallbackWarning, match="indexes the rows of graph data"):
        g.apply_edges(message, compile=True)
    torch.testing.assert_close(g.edata["m"], want)


_GEN = torch.Generator().manual_seed(5)
_W4 = torch.randn(4, 4, generator=_GEN, dtype=torch.float64)
_COLUMN = torch.randn(4, 1, generator=_GEN, dtype=torch.float64)
_SOFTMAX_ROWS, _SOFTMAX_LAST, _LOG_SOFTMAX = torch.nn.Softmax(0), torch.nn.Softmax(-1), torch.nn.LogSoftmax(1)
_LAYER_NORM = torch.nn.LayerNorm(4, dtype=torch.float64)
_GRU, _LSTM, _RNN = (
    cell(4, 4, dtype=torch.float64) for cell in (torch.nn.GRUCell, torch.nn.LSTMCell, torch.nn.RNNCell)
)
_BILINEAR = torch.nn.Bilinear(4, 4, 4, dtype=torch.float64)

# Message UDFs (on the source's h [N, 4], s [N], z [N, 2, 4] and the destination's h) with an operator that
# mixes edge rows: reorder moved each onto node rows (wrong values, no warning) before inference rejected it.
ROW_MIXING_MESSAGES = {
    "normalize_dim0": lambda h, s, z, hd: torch.nn.functional.normalize(h, dim=0),
    "normalize_1d_last_dim": lambda h, s, z, hd: torch.nn.functional.normalize(s, p=1.0, dim=-1),
    "softmax_module_dim0": lambda h, s, z, hd: _SOFTMAX_ROWS(h),
    "softmax_module_last_dim_of_1d": lambda h, s, z, hd: _SOFTMAX_LAST(s),
    "norm_of_every_entry": lambda h, s, z, hd: h / h.norm(2),
    "transpose_attribute_matmul": lambda h, s, z, hd: h @ (h.T @ h) * 0.1,
    "matrix_transpose_matmul": lambda h, s, z, hd: h @ (h.mT @ h) * 0.1,
    "permute_matmul": lambda h, s, z, hd: h @ (h.permute(1, 0) @ h) * 0.1,
    "mm_of_transpose": lambda h, s, z, hd: h @ torch.mm(torch.transpose(h, 0, 1), h) * 0.1,
    "matmul_1d": lambda h, s, z, hd: s * (s @ s),
    "einsum_over_rows": lambda h, s, z, hd: h @ torch.einsum("ef,eg->fg", h, h) * 0.1,
    "einsum_implicit_output": lambda h, s, z, hd: h @ torch.einsum("ef,eg", h, h) * 0.1,
    "broadcast_before_rows": lambda h, s, z, hd: h * (s * _COLUMN).sum(-1),  # [4, 1] * [E]: [4, E]
    "broadcast_size_one_dims": lambda h, s, z, hd: h * (_W4[:1].view(1, 1, 4) * h).sum(1),  # [1, E, 4]
    "repeat_leading_dim": lambda h, s, z, hd: h * h.repeat(1, 1, 1).sum(1),
    "std_over_rows": lambda h, s, z, hd: h - h.std(0),
    "var_all": lambda h, s, z, hd: h / torch.var(h),
    "glu_over_rows": lambda h, s, z, hd: h * torch.nn.functional.glu(torch.cat([h, h], 0), dim=0),
    "unbind_rows": lambda h, s, z, hd: torch.stack(h.unbind(0)[::-1], 0),
    "view_as_across_rows": lambda h, s, z, hd: (h.reshape(4, -1) * 2.0).view_as(h),
    "flip_rows": lambda h, s, z, hd: h.flip(0) * hd + torch.flip(z, [1, 0])[:, 0],
    "roll_without_dims": lambda h, s, z, hd: torch.roll(h, 1) * hd,
    "roll_rows": lambda h, s, z, hd: h.roll(1, 0) + torch.roll(z, shifts=1, dims=-3)[:, 1],
    "narrow_rows": lambda h, s, z, hd: h * h.narrow(0, 0, 1) + hd * torch.narrow(h, -2, 1, 1),  # edge 0's row
    "tensor_split_rows": lambda h, s, z, hd: h * torch.tensor_split(h, [1])[0],
    "softmin_rows": lambda h, s, z, hd: torch.nn.functional.softmin(h, dim=0) + hd,
    # factories sized by graph data: row positions (arange), rows off dim 0, a column count as if rows
    "arange_of_rows": lambda h, s, z, hd: h * torch.arange(h.shape[0], dtype=h.dtype).unsqueeze(1),
    "rows_at_dim_1": lambda h, s, z, hd: h * torch.ones(1, h.size(0), dtype=h.dtype).sum(1, keepdim=True),
    "columns_sized_ones": lambda h, s, z, hd: h @ torch.ones(h.size(1), 4, dtype=h.dtype),
    "columns_sized_new_full": lambda h, s, z, hd: h + hd.new_full((h.shape[1],), 2.0),
    "constant_sized_new_zeros": lambda h, s, z, hd: h + h.new_zeros(4, 4)[0],
}

# Row-wise forms that must keep compiling.
ROW_WISE_MESSAGES = {
    "view_heads": lambda h, s, z, hd: (h.view(-1, 2, 2) * hd.view(-1, 2, 2)).sum(-1),
    "sum_last_dim_keepdim": lambda h, s, z, hd: h * (h * hd).sum(-1, keepdim=True),
    "transpose_feature_dims": lambda h, s, z, hd: z.transpose(1, 2).softmax(-1),
    "permute_feature_dims": lambda h, s, z, hd: z.permute(0, 2, 1) * 2.0,
    "matmul_shared_weight": lambda h, s, z, hd: (h @ _W4).unsqueeze(1) + z @ _W4,
    "bmm": lambda h, s, z, hd: torch.bmm(h.unsqueeze(1), z.transpose(1, 2)).squeeze(1),
    "batched_matmul": lambda h, s, z, hd: (hd.unsqueeze(1) @ z.transpose(1, 2)).squeeze(1),
    "linear": lambda h, s, z, hd: torch.nn.functional.linear(h, _W4) + _LAYER_NORM(hd),
    "softmax_modules_dim1": lambda h, s, z, hd: _LOG_SOFTMAX(h) * _SOFTMAX_LAST(hd),
    "normalize_features": lambda h, s, z, hd: (
        torch.nn.functional.normalize(h) + torch.nn.functional.normalize(hd, p=1.0, dim=-1)
    ),
    "layer_norm_features": lambda h, s, z, hd: torch.nn.functional.layer_norm(h, (4,)),
    "einsum_row_wise": lambda h, s, z, hd: (
        torch.einsum("ef,fg->eg", h, _W4) + torch.einsum("...f,...f", h, hd)[:, None]
    ),
    "index_features": lambda h, s, z, hd: z[:, 0] * z[..., 1].sum(-1, keepdim=True) + h[:, None, 1:].squeeze(1)[:, :1],
    "chunk_features": lambda h, s, z, hd: h.chunk(2, 1)[0] * hd.split(2, dim=-1)[1],
    "cat_and_stack_features": lambda h, s, z, hd: torch.cat([h, hd], -1) + torch.stack([h, hd], 1).flatten(1),
    "expand_and_repeat": lambda h, s, z, hd: s.unsqueeze(-1).expand_as(h) * h.repeat(1, 2)[:, :4],
    "broadcast_shared_row": lambda h, s, z, hd: torch.max(h * _W4[:1], hd) + torch.unsqueeze(s, -1),
    "like_constructors": lambda h, s, z, hd: h * torch.ones_like(hd) + torch.zeros_like(h) + torch.full_like(h, 0.5),
    "nan_to_num_addcmul_lerp": lambda h, s, z, hd: (
        torch.addcmul(torch.nan_to_num(h, posinf=1.0), h, hd, value=0.5)
        + torch.lerp(h, hd, 0.25)
        + h.lerp(hd, s.unsqueeze(-1))
    ),
    "glu_features": lambda h, s, z, hd: torch.nn.functional.glu(torch.cat([h, hd], -1)) * 2.0,
    "recurrent_cells_and_bilinear": lambda h, s, z, hd: _GRU(h, hd) + _LSTM(h)[1] + _RNN(hd, h) + _BILINEAR(h, hd),
    "number_left_of_a_shared_tensor": lambda h, s, z, hd: (
        (1 - _COLUMN[0]) * h
        + 2 ** _COLUMN[1] / hd.exp()
        + 1.0 / (_COLUMN[2] ** 2 + h.abs())
        + torch.rsub(h, 1.5) * (3 + _COLUMN[3])
    ),
    "view_as_std_var": lambda h, s, z, hd: (
        z.flatten(1)[:, :4].view_as(h) * h.std(-1, keepdim=True) + torch.var(hd, dim=1, keepdim=True)
    ),
    "flip_roll_narrow_features": lambda h, s, z, hd: (
        h.flip(-1) * torch.flip(hd, [1])
        + z.flip(1, 2)[:, 0]
        + torch.roll(h, 1, 1)
        + h.roll(shifts=(1, 2), dims=(1, -1))
        + h.narrow(1, 1, 2).repeat(1, 2)
        + torch.narrow(z, -1, 0, 4)[:, 1]
    ),
    "tensor_split_softmin_features": lambda h, s, z, hd: (
        torch.cat(torch.tensor_split(h, [1, 3], dim=1)[::-1], 1) * torch.nn.functional.softmin(hd, dim=-1)
        + torch.nn.functional.softmin(z, 1).sum(1)
    ),
}


def _node_features(g):
    gen = torch.Generator().manual_seed(1)
    n = g.num_nodes()
    return [
        torch.randn(n, 4, generator=gen, dtype=torch.float64).requires_grad_(),
        (torch.rand(n, generator=gen, dtype=torch.float64) + 0.5).requires_grad_(),
        torch.randn(n, 2, 4, generator=gen, dtype=torch.float64).requires_grad_(),
    ]


def _message_values_and_grads(g, body, **compile_flag):
    """Each node's sum of ``body``'s messages, and the gradients of a weighted sum of it w.r.t. h, s and z."""
    h, s, z = feats = _node_features(g)
    g.ndata["h"], g.ndata["s"], g.ndata["z"] = h, s, z
    message = lambda e: {"m": body(e.src["h"], e.src["s"], e.src["z"], e.dst["h"])}
    g.update_all(message, fn.sum("m", "o"), **compile_flag)
    out = g.ndata["o"]
    loss = (out * torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).view_as(out)).sum()
    grads = torch.autograd.grad(loss, feats, allow_unused=True)
    return out.detach(), [torch.zeros_like(x) if gr is None else gr for x, gr in zip(feats, grads)]


@pytest.mark.parametrize("form", sorted(ROW_MIXING_MESSAGES))
def test_operators_that_mix_graph_rows_never_miscompile(form):
    """An operator across edge rows (dim 0) in a message runs eagerly (a FallbackWarning) or, compiled, gives
    eager's values and gradients; float64."""
    g = random_homograph(60, 150, 13)
    body = ROW_MIXING_MESSAGES[form]
    want, want_grads = _message_values_and_grads(g, body)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        got, got_grads = _message_values_and_grads(g, body, compile=True)
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("form", sorted(ROW_WISE_MESSAGES))
def test_row_wise_operators_on_feature_dims_still_compile(form):
    """The same operators over feature dims (and shared weights of no higher rank) keep compiling, exactly."""
    g = random_homograph(60, 150, 13)
    body = ROW_WISE_MESSAGES[form]
    want, want_grads = _message_values_and_grads(g, body)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got, got_grads = _message_values_and_grads(g, body, compile=True)
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)


def test_a_table_read_by_an_edge_feature_is_a_lookup_in_any_spelling():
    g = random_homograph(12, 40, 12)
    g.edata["t"] = torch.randint(0, 4, (g.num_edges(),))
    table = torch.randn(4, 3, dtype=torch.float64)
    for read in (
        lambda e: table[e.data["t"]],
        lambda e: table.index_select(0, e.data["t"]),
        lambda e: torch.index_select(table, 0, e.data["t"]),
    ):
        g.apply_edges(lambda e: {"m": read(e)})
        want = g.edata["m"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", gnnc.FallbackWarning)
            g.apply_edges(lambda e: {"m": read(e)}, compile=True)
        torch.testing.assert_close(g.edata["m"], want)


def test_unlowerable_reduce_keeps_buckets_and_stays_correct():
    g = random_homograph(12, 40, 11)
    g.ndata["h"] = torch.randn(12, 3)
    reduce = lambda nb: {"o": nb.mailbox["m"].sort(dim=1).values[:, 0]}  # sort over the degree dim
    g.update_all(fn.copy_u("h", "m"), reduce)
    eager = g.ndata["o"]
    g.update_all(fn.copy_u("h", "m"), reduce, compile=True)
    torch.testing.assert_close(g.ndata["o"], eager)


# ------------------------------------------------------- random UDF programs
_UNARY = {"relu": torch.relu, "tanh": torch.tanh, "exp_small": lambda t: torch.exp(0.1 * t), "id": lambda t: t}


@st.composite
def udf_programs(draw):
    unary = draw(st.sampled_from(sorted(_UNARY)))
    combine = draw(st.sampled_from(["src", "cat_linear", "src_plus_dst", "src_times_edge", "typed"]))
    reduce = draw(st.sampled_from(["sum", "mean", "max", "min", "softmax_sum", "builtin_sum", "builtin_max"]))
    return unary, combine, reduce


@settings(max_examples=40, deadline=None)
@given(program=udf_programs(), seed=st.integers(0, 1000), hetero=st.booleans())
def test_random_udf_programs_compile_to_the_eager_result(program, seed, hetero):
    unary, combine, reduce = program
    g = random_heterograph(seed) if hetero else random_homograph(10, 30, seed)
    gen = torch.Generator().manual_seed(seed)
    n, e = g.num_nodes(), g.num_edges()
    x = torch.randn(n, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    wc = torch.randn(8, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    wt = torch.randn(len(g.ntypes), 4, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    ew = torch.rand(e, 1, generator=gen, dtype=torch.float64)
    act = _UNARY[unary]

    def message(edges):
        if combine == "src":
            m = act(edges.src["x"] @ w)
        elif combine == "cat_linear":
            m = act(torch.cat([edges.src["x"], edges.dst["x"]], -1) @ wc)
        elif combine == "src_plus_dst":
            m = act(edges.src["x"] @ w) + edges.dst["x"]
        elif combine == "src_times_edge":
            m = act(edges.src["x"]) * edges.data["w"]
        else:
            m = act(torch.bmm(edges.src["x"].unsqueeze(1), edges.srctype["W"]).squeeze(1))
        return {"m": m, "s": (m * edges.dst["x"]).sum(-1)}

    reducers = {
        "sum": lambda nb: {"o": nb.mailbox["m"].sum(1)},
        "mean": lambda nb: {"o": torch.mean(nb.mailbox["m"], dim=1)},
        "max": lambda nb: {"o": nb.mailbox["m"].max(1).values},
        "min": lambda nb: {"o": torch.min(nb.mailbox["m"], 1)[0]},
        "softmax_sum": lambda nb: {"o": (torch.softmax(nb.mailbox["s"], 1).unsqueeze(-1) * nb.mailbox["m"]).sum(1)},
        "builtin_sum": fn.sum("m", "o"),
        "builtin_max": fn.max("m", "o"),
    }

    def run(flag):
        with g.local_scope():
            g.ndata_all["x"], g.edata_all["w"], g.ntype_data["W"] = x, ew, wt
            g.update_all(message, reducers[reduce], compile=flag)
            out = g.ndata_all["o"]
        grads = torch.autograd.grad(out.pow(2).sum(), [x, w, wc, wt], allow_unused=True)
        return out, grads

    eager_out, eager_grads = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        comp_out, comp_grads = run(True)
    torch.testing.assert_close(comp_out, eager_out, rtol=1e-6, atol=1e-9)
    for a, b in zip(comp_grads, eager_grads):
        if a is None or b is None:
            assert (a is None or not a.any()) and (b is None or not b.any())
        else:
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)


def test_dim_taking_functions_on_a_mailbox_are_not_treated_as_elementwise():
    g = random_homograph(12, 40, 12)
    g.ndata["h"] = torch.randn(12, 3)
    reduce = lambda nb: {"o": torch.flatten(torch.unsqueeze(nb.mailbox["m"], 2), 2).sum(1)}
    g.update_all(fn.copy_u("h", "m"), reduce)
    eager = g.ndata["o"]
    g.update_all(fn.copy_u("h", "m"), reduce, compile=True)
    torch.testing.assert_close(g.ndata["o"], eager)


@pytest.mark.parametrize("model", ["gcn", "gat", "rgcn", "rgat", "hgt", "edgeconv", "simple-hgn"])
def test_cli_explain_shows_every_reference_model_optimized_without_fallback(model, capsys):
    from gnnc.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        assert main(["explain", "--model", model, "--graph", "aifb-replica", "--scale", "0.02", "--feat-dim", "8"]) == 0
    text = capsys.readouterr().out
    assert "-- after optimization:" in text and "-- passes:" in text and "FLOPs" in text


def test_graph_with_as_many_edges_as_nodes_and_real_row_counts_in_shapes():
    """Shape propagation runs on stand-in rows per row space; equal real counts must not mix them up."""
    n = 7
    g = gnnc.graph((torch.arange(n), (torch.arange(n) + 1) % n), num_nodes=n)  # a ring: E == N
    for name in ("gat", "edgeconv"):
        assert_compiled_matches_eager(HOMO[name]().double(), g, _inputs(name, g, torch.float64), 1e-6, 1e-9)
    with compiled.recording() as plans, torch.no_grad():
        gnnc.compile(HOMO["gat"]().double())(g, _inputs("gat", g, torch.float64)[0])
    rows = {
        n.meta["shape"][0]
        for p in plans
        for n in p.dfg.graph.nodes
        if n.meta.get("shape") and n.meta.get("res") in ("V", "E")
    }
    assert rows == {n}


def test_compiling_does_not_import_torch_dynamo():
    """torch._dynamo (with sympy) costs ~1 s and ~80 MiB per process: tracing and shape propagation avoid it."""
    code = (
        "import sys, torch, gnnc\n"
        "from gnnc.models import GATConv\n"
        "g = gnnc.graph(([0, 1, 2], [1, 2, 0]), num_nodes=3)\n"
        "gnnc.compile(GATConv(4, 2, 2), backend='torch')(g, torch.randn(3, 4)).sum().backward()\n"
        "print(sorted(m for m in ('torch._dynamo', 'sympy', 'networkx') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_random_draw_from_no_batch_value_falls_back_instead_of_freezing():
    """``edges.src['h'] * torch.rand(4)``: tracing would keep the first draw for every call (a silent mismatch:
    eager draws anew); it runs eagerly with a warning. A constant made in the UDF (``torch.ones``) compiles."""
    g = gnnc.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=3)
    g.ndata["h"] = torch.randn(3, 4)
    outs = []
    for _ in range(2):
        with (
            pytest.warns(gnnc.FallbackWarning, match="rand draws random numbers")
            if not outs
            else warnings.catch_warnings()
        ):
            g.update_all(lambda edges: {"m": edges.src["h"] * torch.rand(4)}, gnnc.function.sum("m", "o"), compile=True)
        outs.append(g.ndata["o"].clone())
    assert not torch.equal(outs[0], outs[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        g.update_all(lambda edges: {"m": edges.src["h"] * torch.ones(4)}, gnnc.function.sum("m", "o"), compile=True)
    torch.testing.assert_close(g.ndata["o"], g.ndata["h"][[2, 0, 1]])
