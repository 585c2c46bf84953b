"""``passes.align`` alone: built-in messages' broadcasts resolved from the operands' ranks, same numbers."""

from __future__ import annotations

import torch

import gnnc.function as fn
from gnnc.compiler.build import build_apply_edges, build_update_all
from gnnc.compiler.driver import trace_call
from gnnc.compiler.passes import align
from gnnc.function import right_align
from gnnc.ir.context import graph_context
from gnnc.ir.rules import infer
from gnnc.ir.shapes import propagate_shapes
from gnnc.runtime.plan import bind_inputs
from tests.graphs import random_homograph


def _annotated(g, message, reduce=None):
    """The annotated MP-DFG of ``g.apply_edges(message)`` (``g.update_all(message, reduce)``) and its inputs."""
    udfs = (message,) if reduce is None else (message, reduce, None)
    traced = trace_call("apply_edges" if reduce is None else "update_all", udfs, g, None)[1]
    dfg = build_apply_edges(*traced) if reduce is None else build_update_all(*traced)
    inputs = bind_inputs(dfg, g, None, udfs, traced)
    propagate_shapes(dfg.module(), graph_context(g, None), inputs)
    infer(dfg.graph, dfg.root)
    return dfg, inputs


def _graph():
    g = random_homograph(10, 30, 0)
    g.ndata["h"] = torch.randn(10, 2, 4, dtype=torch.float64)  # two heads
    g.edata["a"] = torch.rand(g.num_edges(), 4, dtype=torch.float64)  # one dim short: the same for both heads
    g.edata["w"] = torch.rand(g.num_edges(), 2, 4, dtype=torch.float64)
    return g


def _right_aligns(dfg):
    return [n for n in dfg.graph.nodes if n.op == "call_function" and n.target is right_align]


def test_a_lower_rank_operand_gets_unit_dims_and_the_numbers_stay():
    g = _graph()
    message = fn.u_mul_e("h", "a", "m")  # [E, 2, 4] * [E, 4]: DGL aligns a as [E, 1, 4]
    dfg, inputs = _annotated(g, message, fn.sum("m", "o"))
    assert _right_aligns(dfg)
    out, changed = align(dfg)
    assert changed and not _right_aligns(out)
    assert any(n.op == "call_method" and n.target == "unsqueeze" for n in out.graph.nodes)
    assert any(line.startswith("align: resolved") for line in out.log)
    torch.testing.assert_close(out.module()(*inputs)["o"], dfg.module()(*inputs)["o"])
    g.update_all(message, fn.sum("m", "o"))  # eager
    torch.testing.assert_close(out.module()(*inputs)["o"], g.ndata["o"])


def test_operands_of_one_rank_need_no_unit_dims():
    g = _graph()
    dfg, inputs = _annotated(g, fn.u_mul_e("h", "w", "m"))
    out, changed = align(dfg)
    assert changed and not _right_aligns(out)  # the opaque call is gone, nothing is inserted for it
    assert not any(n.op == "call_method" and n.target == "unsqueeze" for n in out.graph.nodes)
    torch.testing.assert_close(out.module()(*inputs)["m"], dfg.module()(*inputs)["m"])


def test_a_plan_without_builtin_messages_is_left_as_it_is():
    g = _graph()
    dfg, _ = _annotated(g, lambda e: {"m": e.src["h"] * e.data["w"]})
    out, changed = align(dfg)
    assert not changed and not out.log
