"""``passes.retype`` alone: per-type tables indexed by an edge feature -> the plan on the block regrouped by
that feature, with the same numbers; left alone where the new edge order could change a result."""

from __future__ import annotations

import torch

import gnnc.function as fn
from gnnc.compiler.build import build_apply_edges, build_update_all
from gnnc.compiler.driver import trace_call
from gnnc.compiler.passes import retype
from gnnc.ir import operators as ops
from gnnc.ir.context import graph_context
from gnnc.ir.rules import infer
from gnnc.ir.shapes import propagate_shapes
from gnnc.runtime.plan import bind_inputs
from tests.graphs import random_homograph

TYPES = 4
TABLE = torch.randn(TYPES, 3, dtype=torch.float64)


def _graph():
    g = random_homograph(12, 40, 0)
    g.ndata["x"] = torch.randn(12, 3, dtype=torch.float64)
    g.edata["rel_type"] = torch.randint(0, TYPES - 1, (g.num_edges(),))  # the last type has no edges
    return g


def _annotated(g, kind, udfs):
    """The annotated whole-graph MP-DFG of the call and its bound inputs."""
    traced = trace_call(kind, udfs, g, None)[1]
    dfg = build_apply_edges(*traced) if kind == "apply_edges" else build_update_all(*traced)
    dfg.whole_graph = True
    inputs = bind_inputs(dfg, g, None, udfs, traced)
    propagate_shapes(dfg.module(), graph_context(g, None), inputs)
    infer(dfg.graph, dfg.root)
    return dfg, inputs


def _message(edges):
    return {"m": edges.src["x"] * TABLE[edges.data["rel_type"]]}


def _targets(dfg):
    return {n.target for n in dfg.graph.nodes}


def test_a_table_indexed_by_an_edge_feature_runs_on_the_regrouped_block():
    g = _graph()
    dfg, inputs = _annotated(g, "apply_edges", (_message,))
    out, changed = retype(dfg)
    assert changed and ops.retype in _targets(out) and ops.gather_etype in _targets(out)
    assert any(
        line.startswith("retype: the plan runs on the block regrouped by edges.data['rel_type']") for line in out.log
    )
    torch.testing.assert_close(out.module()(*inputs)["m"], dfg.module()(*inputs)["m"])  # in the block's edge order


def test_a_sum_over_the_regrouped_edges_is_the_same():
    g = _graph()
    dfg, inputs = _annotated(g, "update_all", (_message, fn.sum("m", "o"), None))
    out, changed = retype(dfg)
    assert changed and ops.retype in _targets(out)
    torch.testing.assert_close(out.module()(*inputs)["o"], dfg.module()(*inputs)["o"])
    g.update_all(_message, fn.sum("m", "o"))  # eager
    torch.testing.assert_close(out.module()(*inputs)["o"], g.ndata["o"])


def test_a_max_keeps_the_graphs_edge_order():
    """max picks the first of tied edges (its gradient goes there): regrouped edges could pick another."""
    g = _graph()
    dfg, _ = _annotated(g, "update_all", (_message, fn.max("m", "o"), None))
    out, changed = retype(dfg)
    assert not changed and ops.retype not in _targets(out)
