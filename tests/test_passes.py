"""Each pass alone on small MP-DFGs: the pattern is rewritten and the meaning is kept."""

import operator
from types import SimpleNamespace
from unittest import mock

import pytest
import torch

import gnnc.function as fn
from gnnc.backend import rebuild_in_backward as recompute_runtime
from gnnc.compiler.build import build_apply_edges, build_update_all
from gnnc.compiler.driver import trace_call
from gnnc.compiler.passes import (
    compact,
    cse,
    dce,
    distribute,
    fuse,
    inplace,
    linear_reorder,
    lower_aggregation,
    node_scales,
    recompute,
    reorder,
    shared_dot,
    split_concat,
    typed_linear,
)
from gnnc.compiler.passes.patterns import is_call
from gnnc.compiler.trace import trace_udf
from gnnc.ir import operators as ops
from gnnc.ir.context import graph_context
from gnnc.ir.rules import InferenceFailure, infer
from gnnc.ir.shapes import propagate_shapes
from gnnc.runtime.plan import bind_inputs
from tests.graphs import random_heterograph, random_homograph

W = torch.randn(4, 4, dtype=torch.float64)
B = torch.randn(4, dtype=torch.float64)
A = torch.randn(2, 8, dtype=torch.float64)


def _prepare(g, dfg, udfs, rel=None):
    inputs = bind_inputs(dfg, g, rel, udfs, trace_call(dfg.kind, udfs, g, rel)[1])

    def annotate(d):
        propagate_shapes(d.module(), graph_context(g, rel), inputs)
        infer(d.graph, d.root)

    annotate(dfg)
    return inputs, annotate


def _targets(dfg):
    return [n.target for n in dfg.graph.nodes]


def _run(dfg, inputs):
    return dfg.module()(*inputs)


def _graph():
    g = random_homograph(10, 30, 0)
    g.ndata["x"] = torch.randn(10, 4, dtype=torch.float64)
    g.ndata["z"] = torch.randn(10, 2, 4, dtype=torch.float64)
    g.edata["w"] = torch.rand(g.num_edges(), 1, dtype=torch.float64)
    return g


def _check(dfg_before, dfg_after, inputs):
    before, after = _run(dfg_before, inputs), _run(dfg_after, inputs)
    assert before.keys() == after.keys()
    for k in before:
        torch.testing.assert_close(after[k], before[k])


def test_lower_aggregation_replaces_buckets_with_segment_operators():
    g = _graph()
    msg = lambda e: {"m": e.src["x"] * e.data["w"], "s": e.src["x"].sum(-1)}
    red = lambda nb: {"o": (torch.softmax(nb.mailbox["s"], 1).unsqueeze(-1) * nb.mailbox["m"]).sum(1) + 1}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, _ = _prepare(g, dfg, (msg, red, None))
    out = lower_aggregation(dfg).dfg
    assert ops.bucketed_reduce not in _targets(out)
    assert {ops.edge_softmax, ops.segment_reduce, ops.zero_unreached} <= set(_targets(out))
    _check(dfg, out, inputs)


@pytest.mark.parametrize(
    "finish, zeroed",
    [
        (lambda s: s.flatten(1), False),
        (lambda s: torch.relu(s).flatten(1) * 2.0, False),
        (lambda s: torch.nn.functional.leaky_relu(s, 0.2).unsqueeze(1), False),
        (lambda s: (s / 0.5).tanh(), False),
        (lambda s: s.view(-1, 8), False),  # the probe keeps the row count: each row is one input row
        (lambda s: torch.reshape(torch.relu(s), (-1, 4, 2)), False),
        (lambda s: s.reshape(s.shape[0], 8), True),  # a size read from the value: not proven
        (lambda s: s.unsqueeze(-1), True),  # a negative dim could name the rows
        (lambda s: s + 1, True),
        (lambda s: torch.sigmoid(s), True),
        (lambda s: s * float("inf"), True),
        (lambda s: s / 0.0, True),
    ],
)
def test_lower_aggregation_zeroes_unreached_rows_only_where_the_result_can_differ(finish, zeroed):
    g = _graph()  # the last quarter of the nodes has no in-edges: eager fills their rows with zeros
    msg = lambda e: {"m": e.src["z"]}
    red = lambda nb: {"o": finish(nb.mailbox["m"].sum(1))}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, _ = _prepare(g, dfg, (msg, red, None))
    out = lower_aggregation(dfg).dfg
    assert ops.bucketed_reduce not in _targets(out)
    assert (ops.zero_unreached in _targets(out)) == zeroed
    before, after = _run(dfg, inputs)["o"], _run(out, inputs)["o"]
    torch.testing.assert_close(after, before, equal_nan=True)


def test_lower_aggregation_probe_runs_in_the_inputs_dtypes():
    """A float64 UDF (features and a module's weights) is probed in float64: its view(-1, ...) keeps rows."""
    g = _graph()
    linear = torch.nn.Linear(4, 4, dtype=torch.float64)
    msg = lambda e: {"m": e.src["z"]}
    red = lambda nb: {"o": nb.mailbox["m"].sum(1).view(-1, 8), "p": linear(nb.mailbox["m"].sum(1))}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, _ = _prepare(g, dfg, (msg, red, None))
    out = lower_aggregation(dfg).dfg
    zeroed = [n.args[1] for n in out.graph.nodes if n.target is ops.zero_unreached]
    assert not any(n.op == "call_method" and n.target == "view" for n in zeroed)
    _check(dfg, out, inputs)


def test_lower_aggregation_probe_leaves_module_state_and_random_stream_alone():
    """The shape probe never runs a module that keeps state (batch norm's running statistics) and
    restores the random stream a dropout draws from."""
    g = _graph()
    norm = torch.nn.BatchNorm1d(8, dtype=torch.float64)
    state = {k: v.clone() for k, v in norm.state_dict().items()}
    msg = lambda e: {"m": e.src["z"]}
    dropped = lambda nb: torch.nn.functional.dropout(nb.mailbox["m"].sum(1), 0.5).view(-1, 8)
    for red in (lambda nb: {"o": norm(dropped(nb))}, lambda nb: {"o": dropped(nb)}):
        dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
        _prepare(g, dfg, (msg, red, None))
        torch.manual_seed(3)
        lower_aggregation(dfg).dfg
        after_pass = torch.rand(4)
        torch.manual_seed(3)
        torch.testing.assert_close(after_pass, torch.rand(4))
    for k, v in norm.state_dict().items():
        torch.testing.assert_close(v, state[k])


def test_lower_aggregation_keeps_buckets_for_degree_dim_indexing():
    g = _graph()
    msg = lambda e: {"m": e.src["x"]}
    red = lambda nb: {"o": nb.mailbox["m"][:, 0]}  # first message: order-dependent
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, _ = _prepare(g, dfg, (msg, red, None))
    out = lower_aggregation(dfg).dfg
    assert ops.bucketed_reduce in _targets(out)
    assert any("kept degree buckets" in line for line in out.log)
    _check(dfg, out, inputs)


def test_split_concat_then_reorder_moves_attention_to_nodes():
    g = _graph()
    msg = lambda e: {"e": (torch.cat([e.src["z"], e.dst["z"]], -1) * A).sum(-1)}
    dfg = build_apply_edges(trace_udf(msg))
    inputs, annotate = _prepare(g, dfg, (msg,))
    split = split_concat(dfg).dfg
    assert torch.cat not in _targets(dce(split).dfg)
    _check(dfg, split, inputs)
    annotate(split)
    moved = dce(reorder(split).dfg).dfg
    gathers = [n for n in moved.graph.nodes if n.target in (ops.gather_src, ops.gather_dst_local)]
    assert all(n.args[1].meta.get("res") != "E" for n in gathers)
    _check(dfg, moved, inputs)


def test_reorder_moves_linear_before_gather_but_not_dropout():
    g = _graph()
    msg = lambda e: {"m": torch.relu(e.src["x"] @ W), "d": torch.nn.functional.dropout(e.src["x"], 0.5)}
    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = reorder(dfg).dfg
    relu = next(n for n in out.graph.nodes if n.target is torch.relu)
    assert [u.target for u in relu.users] == [ops.gather_src]  # relu runs per node, then its result is gathered
    drop = next(n for n in out.graph.nodes if n.target is torch.nn.functional.dropout)
    assert drop.args[0].target is ops.gather_src
    torch.testing.assert_close(_run(out, inputs)["m"], _run(dfg, inputs)["m"])


def test_typed_linear_removes_per_edge_weight_copies():
    g = random_heterograph(1)
    g.ndata_all["x"] = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    g.ntype_data["Wn"] = torch.randn(3, 4, 4, dtype=torch.float64)
    g.etype_data["We"] = torch.randn(5, 4, 4, dtype=torch.float64)

    def msg(e):
        return {
            "a": torch.bmm(e.src["x"].unsqueeze(1), e.srctype["Wn"]).squeeze(1),
            "b": torch.bmm(e.src["x"].unsqueeze(1), e.type["We"]).squeeze(1),
        }

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = dce(typed_linear(dfg).dfg).dfg
    assert ops.gather_srctype not in _targets(out) and ops.gather_etype not in _targets(out)
    assert {ops.ntype_matmul, ops.etype_gather_matmul} <= set(_targets(out))
    _check(dfg, out, inputs)


def _hetero_attention_graph():
    g = random_heterograph(1)
    g.ndata_all["x"] = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    g.etype_data["W"] = torch.randn(5, 4, 6, dtype=torch.float64)
    g.etype_data["a"] = torch.randn(5, 2, 6, dtype=torch.float64)
    return g


def test_compact_computes_typed_linear_per_pair_and_fuse_reads_it_through_the_pair_index():
    g = _hetero_attention_graph()

    def msg(e):
        z_src = torch.bmm(e.src["x"].unsqueeze(1), e.type["W"]).squeeze(1).view(-1, 2, 3)
        z_dst = torch.bmm(e.dst["x"].unsqueeze(1), e.type["W"]).squeeze(1).view(-1, 2, 3)
        return {
            "e": torch.nn.functional.leaky_relu((torch.cat([z_src, z_dst], -1) * e.type["a"]).sum(-1), 0.2),
            "z": z_src,
        }

    red = lambda nb: {"o": (torch.softmax(nb.mailbox["e"], 1).unsqueeze(-1) * nb.mailbox["z"]).sum(1)}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red, None))
    out = dfg
    for p in (lower_aggregation, dce, typed_linear, split_concat, reorder, compact, reorder, linear_reorder, fuse, dce):
        out = p(out).dfg
        annotate(out)
    targets = _targets(out)
    # source rows for the messages; the scores of both sides with the attention folded into W
    assert ops.etype_gather_matmul not in targets and targets.count(ops.etype_pair_matmul) == 3
    folded = [
        n for n in out.graph.nodes if n.target is ops.etype_pair_matmul and is_call(n.args[2], ops.fold_attention)
    ]
    assert sorted(n.args[3] for n in folded) == ["dst", "src"]
    assert all(n.meta["shape"][1:] == (2,) for n in folded)  # [pairs, H], not [pairs, H*D]
    assert ops.pair_etype_rows not in targets
    assert ops.gather_src_pair not in targets and ops.gather_dst_pair not in targets  # all fused or moved
    sddmm = next(n for n in out.graph.nodes if n.target is ops.u_op_v)
    assert (sddmm.args[4], sddmm.args[6]) == ("dst_pair", "src_pair")
    agg = next(n for n in out.graph.nodes if n.target is ops.edge_softmax_aggregate)
    assert agg.args[3] == "src_pair"
    ctx = graph_context(g, None)
    assert ctx.src_pairs.count < g.num_edges() and ctx.dst_pairs.count < g.num_edges()
    _check(dfg, out, inputs)


SCALINGS = {
    "none": lambda s, e: s,
    "hgt": lambda s, e: s * e.type["pri"] / 1.7,  # HGT: a factor per relation and head, then 1 / sqrt(d_k)
    "left": lambda s, e: 0.5 * (e.type["one"] * s),  # a factor per relation for all heads, numbers on the left
    "other dtype": lambda s, e: s * e.type["pri32"],  # promotes the scores: not folded into the float64 W
}
FOLDED = {"none": False, "hgt": True, "left": True, "other dtype": False}


@pytest.mark.parametrize("scaling", SCALINGS)
def test_linear_reorder_turns_hgt_scores_into_one_bilinear_dot(scaling):
    g = random_heterograph(1)
    g.ndata_all["k"] = torch.randn(g.num_nodes(), 2, 3, dtype=torch.float64)
    g.ndata_all["q"] = torch.randn(g.num_nodes(), 2, 3, dtype=torch.float64)
    g.etype_data["Watt"] = torch.randn(5, 2, 3, 3, dtype=torch.float64)
    g.etype_data["pri"] = torch.randn(5, 2, dtype=torch.float64)
    g.etype_data["one"] = torch.randn(5, 1, dtype=torch.float64)
    g.etype_data["pri32"] = torch.randn(5, 2)

    def msg(e):
        k = torch.matmul(e.src["k"].view(-1, 2, 1, 3), e.type["Watt"]).squeeze(2)
        return {"s": SCALINGS[scaling](torch.sum(k * e.dst["q"], dim=-1), e)}

    dfg = build_apply_edges(trace_udf(msg))
    inputs, annotate = _prepare(g, dfg, (msg,))
    out = dfg
    for p in (typed_linear, reorder, typed_linear, compact, reorder, linear_reorder, dce):
        out = p(out).dfg
        annotate(out)
    targets = _targets(out)
    assert targets.count(ops.etype_bilinear_dot) == 1 and ops.etype_pair_head_matmul not in targets
    # the factors went onto the relation matrices: nothing per edge but the scores
    assert (ops.scale_heads in targets) == FOLDED[scaling] and (ops.gather_etype in targets) == (
        scaling == "other dtype"
    )
    _check(dfg, out, inputs)


def test_pairs_are_unique_relation_node_pairs_whatever_the_edge_order():
    g = random_heterograph(2)
    ctx = graph_context(g, None)
    for side, nodes in (("src", ctx.src), ("dst", ctx.dst)):
        pairs = ctx.pairs(side)
        assert torch.equal(pairs.node[pairs.edge_pair], nodes)
        assert torch.equal(pairs.rel[pairs.edge_pair], ctx.edge_rel)
        keys = set(zip(ctx.edge_rel.tolist(), nodes.tolist()))
        assert pairs.count == len(keys)
        assert pairs.rel_ptr == [0] + torch.cumsum(torch.bincount(pairs.rel, minlength=5), 0).tolist()
        assert bool((pairs.rel[1:] >= pairs.rel[:-1]).all())
    empty = graph_context(g, g.canonical_etypes.index(("tag", "empty", "user")))
    assert empty.src_pairs.count == 0 and empty.src_pairs.edge_pair.numel() == 0


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_pair_counts_without_the_tables_equal_the_tables(seed):
    """The cost model's pair counts (per-relation counts, or unique keys when there are many relations) equal
    the built tables' rows, compact or identity, on every relation's block too; asking builds no table."""
    from gnnc.ir import context

    g = random_heterograph(seed)
    blocks = [None] + list(range(len(g.canonical_etypes)))
    for fallback in (False, True):
        counted = {}
        for rel in blocks:
            ctx = graph_context(g, rel)
            ctx.__dict__.pop("_pair_counts", None)
            for side in ("src", "dst"):
                ctx.__dict__.pop(f"{side}_pairs", None)
                with mock.patch.object(context, "BINCOUNT_MAX_WORK", 0 if fallback else 8):
                    counted[rel, side] = ctx.pair_count(side)
                assert f"{side}_pairs" not in ctx.__dict__
        for (rel, side), count in counted.items():
            ctx = graph_context(g, rel)
            assert count == ctx.pairs(side).count
            assert ctx.pair_count(side) == count


def test_fuse_builds_spmm_and_softmax_aggregate():
    g = _graph()
    msg = lambda e: {"m": e.src["x"], "s": e.data["w"].squeeze(-1)}
    red = lambda nb: {"o": (torch.softmax(nb.mailbox["s"], 1).unsqueeze(-1) * nb.mailbox["m"]).sum(1)}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red, None))
    lowered = lower_aggregation(dfg).dfg
    annotate(lowered)
    fused = dce(fuse(lowered).dfg).dfg
    assert ops.edge_softmax_aggregate in _targets(fused) and ops.segment_reduce not in _targets(fused)
    _check(dfg, fused, inputs)

    msg2 = lambda e: {"m": e.src["x"] * e.data["w"]}
    dfg2 = build_update_all(trace_udf(msg2), fn.sum("m", "o"), None)
    inputs2, _ = _prepare(g, dfg2, (msg2, None, None))
    fused2 = dce(fuse(dfg2).dfg).dfg
    assert ops.spmm in _targets(fused2) and ops.gather_src not in _targets(fused2)
    _check(dfg2, fused2, inputs2)


def test_cse_merges_repeats_and_dce_drops_dead_code():
    g = _graph()
    msg = lambda e: {"m": torch.tanh(e.src["x"]) + torch.tanh(e.src["x"])}
    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    merged = dce(cse(dfg).dfg).dfg
    assert sum(n.target is torch.tanh for n in merged.graph.nodes) == 1
    _check(dfg, merged, inputs)


def test_fuse_postpones_destination_factors_into_a_plain_spmm():
    g = _graph()
    g.ndata["c"] = torch.rand(10, 1, dtype=torch.float64)
    msg = lambda e: {"m": e.src["c"] * e.dst["c"] * e.src["x"]}  # GCN's normalised message
    dfg = build_update_all(trace_udf(msg), fn.sum("m", "o"), None)
    inputs, _ = _prepare(g, dfg, (msg, None, None))
    fused = dce(fuse(dfg).dfg).dfg
    assert ops.spmm in _targets(fused) and ops.gather_dst not in _targets(fused)
    spmm = next(n for n in fused.graph.nodes if n.target is ops.spmm)
    assert spmm.args[2] is None  # a plain copy-sum: no per-edge weight left
    _check(dfg, fused, inputs)


def _scaled_plan(g, msg, red):
    dfg = build_update_all(trace_udf(msg), red if not callable(red) else trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red if callable(red) else None, None))
    out = dfg
    for p in (lower_aggregation, dce, fuse, dce, node_scales):
        out = p(out).dfg
        annotate(out)
    return dfg, out, inputs


@pytest.mark.parametrize(
    "udf, sides",
    [
        ((lambda e: {"m": e.src["c"] * e.dst["c"] * e.src["x"]}, fn.sum("m", "o")), "source and destination"),
        ((lambda e: {"m": e.src["x"] * e.src["c"]}, fn.mean("m", "o")), "source"),
        ((lambda e: {"m": e.dst["c"] * (e.src["x"] * e.data["w"])}, fn.sum("m", "o")), "destination"),
        ((lambda e: {"m": e.src["x"]}, lambda nb: {"o": nb.mailbox["m"].sum(1) * nb.data["c"]}), "destination"),
        ((lambda e: {"m": e.src["z"] * e.src["c3"]}, fn.sum("m", "o")), "source"),  # heads: [N, 1, 1]
    ],
)
def test_node_scales_fold_one_value_per_node_into_the_sum(udf, sides):
    """GCN's normalisation in the styles users write it (both factors in the message, one, a weighted message,
    the destination factor in the reduce UDF) becomes one scaled_spmm with no product left; same values and
    gradients."""
    g = _graph()
    g.ndata["c"] = torch.rand(10, 1, dtype=torch.float64)
    g.ndata["c3"] = torch.rand(10, 1, 1, dtype=torch.float64)
    msg, red = udf
    dfg, out, inputs = _scaled_plan(g, msg, red)
    scaled = [n for n in out.graph.nodes if is_call(n, ops.scaled_spmm)]
    assert len(scaled) == 1 and ops.spmm not in _targets(out)
    assert not [n for n in out.graph.nodes if n.op == "call_function" and n.target in (operator.mul, torch.mul)]
    assert any(line.startswith("node_scales: ") and f": {sides} node scale" in line for line in out.log)
    assert ops.zero_unreached not in _targets(out)  # the scaled sum leaves unreached destinations at zero
    _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)


def test_node_scales_keep_unreached_destinations_zero_under_an_infinite_scale():
    """DGL's GCN tutorial norm without its isinf fix: deg ** -0.5 is inf where nothing arrives. Eager never
    runs the reduce there (zeros); the scaled sum must give zeros too, not 0 * inf."""
    g = _graph()
    deg = g.in_degrees().to(torch.float64)
    assert (deg == 0).any()
    g.ndata["c"] = deg.pow(-0.5).unsqueeze(1)
    dfg, out, inputs = _scaled_plan(
        g, lambda e: {"m": e.src["x"]}, lambda nb: {"o": nb.mailbox["m"].sum(1) * nb.data["c"]}
    )
    assert ops.scaled_spmm in _targets(out) and ops.zero_unreached not in _targets(out)
    _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)


def test_node_scales_leave_factors_that_are_not_one_value_per_node():
    """A factor as wide as the rows, or a scaled sum read twice, keeps its products."""
    g = _graph()
    g.ndata["c"] = torch.rand(10, 4, dtype=torch.float64)
    _, out, _ = _scaled_plan(g, lambda e: {"m": e.src["c"] * e.src["x"]}, fn.sum("m", "o"))
    assert ops.scaled_spmm not in _targets(out)

    def read_twice(nb):
        s = nb.mailbox["m"].sum(1)
        return {"h": s * nb.data["n"], "k": s + 1.0}

    g.ndata["n"] = torch.rand(10, 1, dtype=torch.float64)
    dfg, out, inputs = _scaled_plan(g, lambda e: {"m": e.src["x"]}, read_twice)
    assert ops.scaled_spmm not in _targets(out)
    _check(dfg, out, inputs)


def test_scaled_spmm_runs_scales_it_cannot_fold_as_the_composition():
    """At run time a scale of another dtype, or one row broadcast to all, runs as spmm(x * s) * d."""
    g = _graph()
    ctx = graph_context(g, None)
    x = g.ndata["x"]
    for s, d in (
        (torch.rand(10, 1, dtype=torch.float32), None),
        (None, torch.rand(1, 1, dtype=torch.float64)),
        (torch.rand(10, 1, dtype=torch.float64), torch.rand(10, 1, dtype=torch.float64)),
    ):
        got = ops.scaled_spmm(ctx, x, None, "copy", "sum", s, d)
        want = ops.spmm(ctx, x if s is None else x * s, None, "copy", "sum")
        torch.testing.assert_close(got, want if d is None else ops.zero_unreached(ctx, want * d))


def test_distribute_splits_linear_maps_of_sums_so_each_half_runs_per_node():
    g = _graph()
    F = torch.nn.functional
    msg = lambda e: {"l": F.linear(e.src["x"] - e.dst["x"], W, B), "m": (e.src["x"] + e.dst["x"]) @ W}
    dfg = build_apply_edges(trace_udf(msg))
    inputs, annotate = _prepare(g, dfg, (msg,))
    out = distribute(dfg).dfg
    assert sum("distribute" in line for line in out.log) == 2
    annotate(out)
    moved = dce(reorder(out).dfg).dfg
    annotate(moved)
    linears = [n for n in moved.graph.nodes if n.target in (F.linear, torch.matmul) or "matmul" in str(n.target)]
    assert len(linears) == 4 and all(n.meta["res"] == "V" for n in linears)  # all four run per node
    _check(dfg, moved, inputs)


def test_distribute_leaves_a_sum_with_other_users_and_sums_without_broadcasts():
    g = _graph()

    def msg(e):
        d = e.src["x"] - e.dst["x"]
        return {"l": d @ W, "d": d}

    dfg = build_apply_edges(trace_udf(msg))
    _prepare(g, dfg, (msg,))
    assert not any("distribute" in line for line in distribute(dfg).dfg.log)
    msg2 = lambda e: {"l": (e.data["w"] + e.data["w"]) @ W[:1]}  # no broadcast to move
    dfg2 = build_apply_edges(trace_udf(msg2))
    _prepare(g, dfg2, (msg2,))
    assert not any("distribute" in line for line in distribute(dfg2).dfg.log)


def test_fuse_adds_destination_terms_after_max_min_and_mean():
    g = _graph()
    g.ndata["c"] = torch.rand(10, 1, dtype=torch.float64)
    msg = lambda e: {"m": e.src["x"] * 2 - e.dst["x"] + e.dst["c"]}
    for reduce in (fn.max, fn.min, fn.mean):
        dfg = build_update_all(trace_udf(msg), reduce("m", "o"), None)
        inputs, _ = _prepare(g, dfg, (msg, None, None))
        fused = dce(fuse(dfg).dfg).dfg
        assert ops.gather_dst not in _targets(fused) and ops.zero_unreached in _targets(fused)
        assert any("destination-side term added after" in line for line in fused.log)
        _check(dfg, fused, inputs)  # nodes without in-edges stay 0
    dfg = build_update_all(trace_udf(msg), fn.sum("m", "o"), None)  # a sum would need the degree: not hoisted,
    inputs, _ = _prepare(g, dfg, (msg, None, None))  # the whole message is computed inside the sum instead
    fused = dce(fuse(dfg).dfg).dfg
    assert not any("destination-side term added after" in line for line in fused.log)
    assert ops.gather_dst not in _targets(fused) and ops.edge_expr_aggregate in _targets(fused)
    _check(dfg, fused, inputs)


def test_fuse_applies_leaky_relu_and_relu_inside_the_sddmm():
    g = _graph()
    g.ndata["c"] = torch.randn(10, 3, dtype=torch.float64)
    F = torch.nn.functional

    def msg(e):
        return {
            "a": F.leaky_relu(e.src["x"] + e.dst["x"], 0.2),
            "r": torch.relu(e.src["c"] * e.dst["c"]),
            "d": F.leaky_relu((e.src["z"] * e.dst["z"]).sum(-1), 0.1),
        }

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    fused = dce(fuse(dfg).dfg).dfg
    sddmms = [n for n in fused.graph.nodes if n.target is ops.u_op_v]
    slopes = sorted(n.args[5] for n in sddmms if len(n.args) > 5 and n.args[5] is not None)
    assert slopes == [0.0, 0.2]  # the sum of the product became a dot, whose activation stays outside
    assert [n.args[3] for n in sddmms if n.args[3] == "dot"] == ["dot"]
    assert F.relu not in _targets(fused) and torch.relu not in _targets(fused)
    _check(dfg, fused, inputs)


def test_fuse_computes_sddmm_logits_inside_the_softmax_aggregation():
    g = _graph()
    g.ndata["s"] = torch.randn(10, 2, 1, dtype=torch.float64) * 30  # large logits
    F = torch.nn.functional
    msg = lambda e: {"m": e.src["z"], "l": F.leaky_relu(e.src["s"] + e.dst["s"], 0.2)}
    red = lambda nb: {"o": (torch.softmax(nb.mailbox["l"], 1) * nb.mailbox["m"]).sum(1)}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red, None))
    lowered = lower_aggregation(dfg).dfg
    annotate(lowered)
    once = fuse(lowered).dfg  # builds the SDDMM and the softmax aggregation; as in the pipeline, a second
    annotate(once)  # run (on the annotated result) folds the first into the second
    fused = dce(fuse(once).dfg).dfg
    targets = _targets(fused)
    assert ops.sddmm_softmax_aggregate in targets
    assert ops.u_op_v not in targets and ops.edge_softmax_aggregate not in targets
    _check(dfg, fused, inputs)
    _check_grads(dfg, fused, inputs)

    def shared(e):
        logits = e.src["s"] * e.dst["s"]
        return {"m": e.src["z"], "l": logits, "k": logits}

    def red2(nb):
        return {
            "o": (torch.softmax(nb.mailbox["l"], 1) * nb.mailbox["m"]).sum(1),
            "p": nb.mailbox["k"].max(1).values,
        }

    dfg = build_update_all(trace_udf(shared), trace_udf(red2), None)
    inputs, annotate = _prepare(g, dfg, (shared, red2, None))
    lowered = lower_aggregation(dfg).dfg
    annotate(lowered)
    once = fuse(lowered).dfg
    annotate(once)
    fused = dce(fuse(once).dfg).dfg  # the SDDMM also feeds the max: it stays, and the aggregation reads it
    assert ops.sddmm_softmax_aggregate not in _targets(fused) and ops.edge_softmax_aggregate in _targets(fused)
    _check(dfg, fused, inputs)


def test_shared_dot_turns_product_and_sum_into_one_matmul():
    g = _graph()
    head = A[:, :4]  # [2, 4]: one row per head

    def msg(e):
        return {
            "a": (e.src["z"] * head).sum(-1, keepdim=True),
            "b": (A[0, :4] * e.src["x"]).sum(-1),  # broadcast weight, one head
            "c": (e.src["z"] * e.data["w"].unsqueeze(-1)).sum(-1),  # not shared: untouched
        }

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = shared_dot(dfg).dfg
    dots = [n for n in out.graph.nodes if n.target is ops.shared_dot]
    assert len(dots) == 2 and [n.args[2] for n in dots] == [True, False]
    assert sum(1 for n in dce(out).dfg.graph.nodes if n.target == "sum") == 1
    _check(dfg, out, inputs)


def test_shared_dot_takes_weights_with_leading_size_one_dims():
    """DGL's GATConv keeps ``attn_l`` as [1, H, F]: its leading 1 broadcasts against the rows."""
    g = _graph()
    attn_l = A[:, :4].unsqueeze(0)  # [1, 2, 4]

    def msg(e):
        return {
            "a": (e.src["z"] * attn_l).sum(-1),
            "b": (A[0, :4].view(1, 4) * e.dst["x"]).sum(-1, keepdim=True),  # [1, 4] vs [E, 4]
        }

    # ([1, 1, 4] * [E, 4]: a dim before the rows, rejected by inference: ROWS_MOVED["broadcast_size_one_dims"])
    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = shared_dot(dfg).dfg
    assert len([n for n in out.graph.nodes if n.target is ops.shared_dot]) == 2
    _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)


def test_shared_dot_merges_both_ends_of_gat_with_size_one_leading_weights():
    """DGL's GATConv ported to UDFs: ``(src z * attn_l).sum(-1) + (dst z * attn_r).sum(-1)``, both [1, H, F]."""
    g = _graph()
    attn_l, attn_r = A[:, :4].unsqueeze(0), A[:, 4:8].unsqueeze(0)
    msg = lambda e: {"e": (e.src["z"] * attn_l).sum(-1) + (e.dst["z"] * attn_r).sum(-1)}
    _check_both_ends_in_one_dot(g, msg)


def _check_both_ends_in_one_dot(g, msg):
    """After reorder, shared_dot computes the attention scores of both ends in one matmul, as before."""
    dfg = build_apply_edges(trace_udf(msg))
    inputs, annotate = _prepare(g, dfg, (msg,))
    moved = reorder(dfg).dfg
    annotate(moved)
    out = shared_dot(moved).dfg
    (dot,) = _shared_dots(out)
    assert len(dot.args[1]) == 2
    _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)


def test_shared_dot_moves_parameters_read_after_the_first_product():
    """A module's parameters are read where the UDF reads them: attn_r after the source half's dot."""

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_l = torch.nn.Parameter(A[:, :4].unsqueeze(0).clone())
            self.attn_r = torch.nn.Parameter(A[:, 4:8].clone())

        def edge_attention(self, edges):
            return {"e": (edges.src["z"] * self.attn_l).sum(-1) + (self.attn_r[:, :4] * edges.dst["z"]).sum(-1)}

    _check_both_ends_in_one_dot(_graph(), Attention().edge_attention)


def test_shared_dot_skips_a_product_with_other_users_and_weights_that_expand_rows():
    g = _graph()

    def msg(e):
        product = e.src["z"] * A[:, :4]
        return {
            "p": product,
            "s": product.sum(-1),
            "x": (e.src["x"][:, None, :] * A[:, :4]).sum(-1),
        }  # the weight expands x: [E, 1, 4] -> [E, 2, 4]

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = shared_dot(dfg).dfg
    assert ops.shared_dot not in _targets(out)
    _check(dfg, out, inputs)


_IDX = torch.tensor([0, 1])
_W3 = torch.randn(2, 4, 4, dtype=torch.float64)
_SOFTMAX_DIM0, _SOFTMAX_NO_DIM, _SOFTMAX_LAST = torch.nn.Softmax(0), torch.nn.Softmax(), torch.nn.Softmax(-1)

# Operators that combine, move, drop or add graph rows (dim 0), each in a message UDF on edge rows; reorder
# would move them onto node rows. x: [E, 4], z: [E, 2, 4], s: [E].
ROWS_MOVED = {
    "normalize_dim0": lambda x, z, s: torch.nn.functional.normalize(x, dim=0),
    "normalize_p_then_dim0": lambda x, z, s: torch.nn.functional.normalize(x, 2.0, 0),  # args[1] is p
    "normalize_last_dim_of_1d": lambda x, z, s: torch.nn.functional.normalize(s, dim=-1),
    "softmax_module_dim0": lambda x, z, s: _SOFTMAX_DIM0(x),
    "softmax_module_dim_none": lambda x, z, s: _SOFTMAX_NO_DIM(x),
    "softmax_module_last_dim_of_1d": lambda x, z, s: _SOFTMAX_LAST(s),
    "layer_norm_shape_variable": lambda x, z, s: torch.nn.functional.layer_norm(x, x.shape),
    "softmax_dim_variable": lambda x, z, s: x.softmax(x.dim() - 1),
    "max_dim_variable": lambda x, z, s: torch.max(x, dim=x.dim() - 2).values,
    "norm_p_only": lambda x, z, s: x / x.norm(2),  # args[1] is p: every entry
    "norm_p_then_dim0": lambda x, z, s: x / x.norm(2, 0),
    "cat_rows_negative_dim": lambda x, z, s: torch.cat([x, x], -2),
    "stack_rows_negative_dim": lambda x, z, s: torch.stack([x, x], -3),
    "chunk_default_dim": lambda x, z, s: x.chunk(2)[0],
    "chunk_dim0": lambda x, z, s: x.chunk(2, 0)[1],
    "split_default_dim": lambda x, z, s: x.split(3)[0],
    "slice_of_rows": lambda x, z, s: x[1:],
    "strided_rows": lambda x, z, s: x[::2],
    "none_before_rows": lambda x, z, s: x[None],
    "ellipsis_reaching_rows": lambda x, z, s: s[..., 0],
    "graph_index_off_dim0": lambda x, z, s: x[:, (s > 0.5).to(torch.int64)],
    "tensor_indices_apart": lambda x, z, s: z.unsqueeze(-1)[:, _IDX, :, _IDX],
    "view_flattens_rows": lambda x, z, s: x.view(-1),
    "reshape_function": lambda x, z, s: torch.reshape(x, (2, -1)),
    "flatten_function": lambda x, z, s: torch.flatten(x),
    "unsqueeze_function_dim0": lambda x, z, s: torch.unsqueeze(x, 0),
    "squeeze_function_dim0": lambda x, z, s: torch.squeeze(x, 0),
    "transpose_function": lambda x, z, s: torch.transpose(x, 0, 1),
    "transpose_attribute": lambda x, z, s: x.T,
    "matrix_transpose_attribute": lambda x, z, s: x.mT,
    "permute": lambda x, z, s: z.permute(1, 0, 2),
    "repeat_leading_dim": lambda x, z, s: x.repeat(1, 1, 1),
    "expand_leading_dim": lambda x, z, s: x.expand(2, -1, -1),
    "matmul_1d": lambda x, z, s: s @ s,
    "matmul_graph_matrix_left_of_batch": lambda x, z, s: x @ z.transpose(1, 2),  # [E, 4] @ [E, 4, 2]: [E, E, 2]
    "matmul_shared_batch_right": lambda x, z, s: x @ _W3,  # [E, 4] @ [2, 4, 4]: [2, E, 4]
    "einsum_explicit": lambda x, z, s: torch.einsum("ef,eg->fg", x, x),
    "einsum_implicit": lambda x, z, s: torch.einsum("ef,eg", x, x),
    "einsum_ellipsis_output": lambda x, z, s: torch.einsum("e...,e...->...", z, z),
    "einsum_wider_shared_ellipsis": lambda x, z, s: torch.einsum("...f,...f->...f", x, _W3[:, :1]),
    "where_of_one_argument": lambda x, z, s: torch.where(s > 0.5)[0],
    "broadcast_before_rows": lambda x, z, s: s * A[:, :1],  # [E] * [2, 1]: [2, E]
    "broadcast_size_one_dims": lambda x, z, s: A[0, :4].view(1, 1, 4) * x,  # [1, E, 4]
}


@pytest.mark.parametrize("op", sorted(ROWS_MOVED))
@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_inference_rejects_operators_that_move_graph_rows(op):
    """A Dense operator must keep each graph row at its place: inference rejects (the call runs eagerly) an
    operator that reduces, contracts, indexes, reshapes, transposes or broadcasts across dim 0, or whose dims
    are variables, instead of letting reorder move it onto other rows."""
    g = _graph()
    g.ndata["s"] = torch.rand(10, dtype=torch.float64)
    msg = lambda e: {"m": ROWS_MOVED[op](e.src["x"], e.src["z"], e.src["s"])}
    with pytest.raises(InferenceFailure):
        _prepare(g, build_apply_edges(trace_udf(msg)), (msg,))


def _check_grads(dfg_before, dfg_after, inputs):
    """Both graphs give the same gradients of a nonlinear loss w.r.t. every floating-point input."""

    def grads(dfg):
        leaves = [
            x.detach().requires_grad_() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
        ]
        loss = sum((v * v).sum() for v in _run(dfg, leaves).values())
        return torch.autograd.grad(loss, [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad])

    for after, before in zip(grads(dfg_after), grads(dfg_before)):
        torch.testing.assert_close(after, before)


def _shared_dots(dfg):
    return [n for n in dce(dfg).dfg.graph.nodes if n.target is ops.shared_dot]


def _merges(dfg):
    return [line for line in dfg.log if "on the same rows -> one matmul" in line]


def test_shared_dot_merges_products_that_read_the_same_rows():
    g = _graph()
    wa, wb, wc = (torch.randn(shape, dtype=torch.float64) for shape in ((2, 4), (4,), (1, 4)))

    def msg(e):
        return {
            "a": (e.src["z"] * wa).sum(-1, keepdim=True),
            "b": (e.src["z"] * wb).sum(-1),
            "c": (wc * e.src["z"]).sum(-1),
        }

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = shared_dot(dfg).dfg
    dots = _shared_dots(out)
    assert len(dots) == 1 and len(dots[0].args[1]) == 3 and len(_merges(out)) == 1
    assert "3 products with shared tensors on the same rows -> one matmul" in _merges(out)[0]
    _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)


def _attention_on_nodes(g, msg, rel=None):
    """(as written, after split_concat + reorder, inputs): products of node data moved before their gathers."""
    dfg = build_apply_edges(trace_udf(msg))
    inputs, annotate = _prepare(g, dfg, (msg,), rel)
    split = split_concat(dfg).dfg
    annotate(split)
    moved = dce(reorder(split).dfg).dfg
    annotate(moved)
    return dfg, moved, inputs


def test_shared_dot_merges_source_and_destination_rows_of_one_tensor():
    g = random_heterograph(1)
    g.ndata_all["z"] = torch.randn(g.num_nodes(), 2, 4, dtype=torch.float64)
    wa, wb = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    gat = lambda e: {"e": (torch.cat([e.src["z"], e.dst["z"]], -1) * A).sum(-1, keepdim=True)}
    dst_only = lambda e: {"d": (e.dst["z"] * wa).sum(-1) - (e.dst["z"] * wb).sum(-1)}
    for rel in (None, g.canonical_etypes.index(("user", "likes", "item"))):  # whole graph; a block past node 0
        for msg, on_dst_rows in ((gat, False), (dst_only, True)):  # mixed: all rows, then Vd rows of the result
            dfg, moved, inputs = _attention_on_nodes(g, msg, rel)
            out = shared_dot(moved).dfg
            (dot,) = _shared_dots(out)
            assert len(_merges(out)) == 1 and (dot.args[0].target is ops.dst_nodes) == on_dst_rows
            _check(dfg, out, inputs)
            _check_grads(dfg, out, inputs)


def test_shared_dot_does_not_merge_other_rows_or_dtypes():
    g = _graph()
    wa, wb = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4)

    def msg(e):
        return {
            "s": (e.src["z"] * wa).sum(-1),
            "d": (e.dst["z"] * wa).sum(-1),
            "f": (e.src["z"].float() * wb).sum(-1),
        }

    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = shared_dot(dfg).dfg
    assert len(_shared_dots(out)) == 3 and not _merges(out)
    _check(dfg, out, inputs)


def test_recompute_marks_node_values_rebuilt_from_inputs_but_not_returned_or_random_ones(monkeypatch):
    g = random_heterograph(1)
    g.ndata_all["x"] = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    g.ntype_data["W"] = torch.randn(3, 4, 4, dtype=torch.float64)
    g.ntype_data["b"] = torch.randn(3, 4, dtype=torch.float64)

    def upd(nb):
        k = torch.bmm(nb.data["x"].unsqueeze(1), nb.type["W"]).squeeze(1) + nb.type["b"]
        noisy = torch.nn.functional.dropout(k, 0.5, True)
        return {"h": torch.tanh(k) * nb.data["t"], "d": (noisy * 2.0) * nb.data["t"]}

    msg = lambda e: {"m": e.src["x"]}
    red = lambda nb: {"t": nb.mailbox["m"].sum(1)}
    dfg = build_update_all(trace_udf(msg), trace_udf(red), trace_udf(upd))
    inputs, annotate = _prepare(g, dfg, (msg, red, upd))
    out = dfg
    for p in (lower_aggregation, dce, typed_linear, fuse, dce, recompute):
        out = p(out).dfg
        annotate(out)
    marked = [n.args[0] for n in out.graph.nodes if n.target is ops.recomputable]
    # k (kept by tanh and by the dropout) and tanh(k) (kept by the product): rebuilt from x, W and b;
    # never the dropout nor what depends on it, nor the returned values
    assert sorted(n.target.__name__ for n in marked) == ["add", "tanh"]
    assert all(n.target is not torch.nn.functional.dropout for n in marked)
    returned = set(out.output_node.all_input_nodes)
    assert not returned & set(marked)
    monkeypatch.setattr(recompute_runtime, "MIN_SHARE", 0)
    rebuilt = []
    monkeypatch.setattr(
        recompute_runtime, "_rebuilt", lambda note, f=recompute_runtime._rebuilt: rebuilt.append(1) or f(note)
    )
    with recompute_runtime.saving():
        _check_grads(_seeded(dfg), _seeded(out), inputs)
    assert rebuilt


def _seeded(dfg):
    """``dfg`` whose every run starts from one random seed (the same dropout masks in both graphs)."""
    module = dfg.module()

    def run(*inputs):
        torch.manual_seed(0)
        return module(*inputs)

    return SimpleNamespace(module=lambda: run)


def _inplace_plan(g, msg, red):
    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red, None))
    out = dfg
    for p in (lower_aggregation, dce, fuse, dce, inplace):
        out = p(out).dfg
        annotate(out)
    return dfg, out, inputs


def test_inplace_writes_into_aggregation_results_nothing_else_reads():
    """GCN's destination factor after the sum and a bias after it run in place; an operator on a graph input
    or on a value read twice does not; results equal out-of-place, in inference (written in place) and
    with gradients (out of place: autograd records those operators)."""
    g = _graph()
    g.ndata["n"] = torch.rand(10, 1, dtype=torch.float64)
    bias = torch.randn(4, dtype=torch.float64)
    msg = lambda e: {"m": e.src["x"] * e.dst["n"]}
    red = lambda nb: {"h": 0.5 * (bias + nb.mailbox["m"].sum(1)), "u": nb.data["x"] * 2.0}
    dfg, out, inputs = _inplace_plan(g, msg, red)
    rewritten = [n for n in out.graph.nodes if is_call(n, ops.in_place)]
    # the factor after the sum, the bias, the scale: the last two into their right operand
    assert [n.args[0] for n in rewritten] == ["mul", "add", "mul"]
    assert is_call(rewritten[0].args[1], ops.spmm)
    assert rewritten[1].args[1] is rewritten[0] and rewritten[2].args[1] is rewritten[1]
    assert [n.args[3] for n in rewritten] == [True, True, True]  # a sum and in-place results: no backward keeps them
    assert any("inplace: 3 elementwise" in line for line in out.log)
    with torch.no_grad():
        _check(dfg, out, inputs)
    _check_grads(dfg, out, inputs)

    def read_twice(nb):
        s = nb.mailbox["m"].sum(1)
        return {"h": s + 1.0, "k": s * 2.0}

    dfg, out, inputs = _inplace_plan(g, lambda e: {"m": e.src["x"]}, read_twice)
    assert not [n for n in out.graph.nodes if is_call(n, ops.in_place)]
    with torch.no_grad():
        _check(dfg, out, inputs)

    def exp_then_bias(nb):  # exp keeps its result for backward: written only where nothing records
        return {"h": torch.exp(nb.mailbox["m"].sum(1)) + 1.0}

    dfg, out, inputs = _inplace_plan(g, lambda e: {"m": e.src["x"]}, exp_then_bias)
    assert [n.args[3] for n in out.graph.nodes if is_call(n, ops.in_place)] == [False]
    _check_grads(dfg, out, inputs)

    def relu_in_place(nb):  # F.relu(t, True) returns t itself (traced as inplace=True): never written
        s = nb.mailbox["m"].sum(1)
        return {"h": torch.nn.functional.relu(s, True) + 1.0, "k": s * 2.0}

    dfg, out, inputs = _inplace_plan(g, lambda e: {"m": e.src["x"]}, relu_in_place)
    assert not [n for n in out.graph.nodes if is_call(n, ops.in_place)]


@pytest.mark.parametrize("case", ["written", "grows", "promotes", "recorded", "integer_division"])
def test_in_place_op_writes_into_its_operand_only_when_that_is_exact(case):
    a = torch.arange(6, dtype=torch.float64).reshape(2, 3) + 1
    b = {
        "written": torch.full((3,), 2.0, dtype=torch.float64),
        "grows": torch.ones(4, 2, 3, dtype=torch.float64),
        "promotes": torch.full((3,), 2.0, dtype=torch.complex128),
        "recorded": torch.full((3,), 2.0, dtype=torch.float64, requires_grad=True),
        "integer_division": torch.full((3,), 2, dtype=torch.int64),
    }[case]
    if case == "promotes":
        a = a.float()
    op = "mul"
    if case == "integer_division":
        a, op = a.long(), "div"
    want = a * b if op == "mul" else a / b
    got = ops.in_place(op, a, b)
    torch.testing.assert_close(got, want)
    assert (got.data_ptr() == a.data_ptr()) == (case == "written")


@pytest.mark.parametrize("case", ["add", "sub", "mul", "saved", "view", "leaf"])
def test_in_place_op_under_autograd_writes_only_adds_into_results_no_backward_keeps(case):
    """While autograd records, an add or subtract goes into ``a`` when its producer keeps nothing of it
    (``unsaved``) and ``a`` is neither a view nor a leaf that needs a gradient; a product (whose gradient reads
    ``a``), a result that is kept, a view or such a leaf take a new buffer. Gradients equal the out-of-place
    ones either way."""
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    op = case if case in ("add", "sub", "mul") else "add"

    def a_of(x):
        if case == "leaf":
            return x
        return (x * 2.0)[:, :] if case == "view" else x * 2.0

    a = a_of(x)
    got = ops.in_place(op, a, b, case != "saved")
    written = got.data_ptr() == a.data_ptr() and got is a
    assert written == (case in ("add", "sub"))
    want = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op](a_of(x), b)
    torch.testing.assert_close(got, want)
    leaves = [x, b]
    for g_got, g_want in zip(
        torch.autograd.grad((got * got).sum(), leaves), torch.autograd.grad((want * want).sum(), leaves)
    ):
        torch.testing.assert_close(g_got, g_want)
