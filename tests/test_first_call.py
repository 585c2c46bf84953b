"""First calls: the stage timings (``gnnc.stage_timings``, ``gnnc explain --timings``) and the cuts they led to
(passes that changed nothing are not annotated again; shape propagation on one thread)."""

import contextlib
import io
import warnings

import pytest
import torch

import gnnc
from gnnc import models, stage_timings
from gnnc.cli import main as cli_main
from gnnc.compiler import driver
from gnnc.compiler.passes import pipeline
from gnnc.ir import shapes
from gnnc.ir.printer import format_dfg
from gnnc.ir.shapes import propagate_shapes
from tests.graphs import random_heterograph


def test_stage_times_are_own_times_that_add_up_to_the_wall_time():
    with stage_timings.recording() as times:
        with stage_timings.timed("outer"):
            with stage_timings.timed("inner") as frame:
                frame.name = "renamed"
            with stage_timings.timed("inner"):
                pass
    table = times.table()
    assert set(table) == {"outer", "renamed", "inner", stage_timings.OUTSIDE}
    assert times.counts == {"outer": 1, "renamed": 1, "inner": 1}
    assert all(v >= 0 for k, v in table.items() if k != stage_timings.OUTSIDE)
    assert sum(table.values()) == pytest.approx(times.wall, abs=1e-9)


def test_stages_outside_recording_record_nothing():
    with stage_timings.timed("anything") as frame:
        assert frame is None
    with stage_timings.recording() as times:
        pass
    assert times.seconds == {} and times.table() == {stage_timings.OUTSIDE: times.wall}


def _hgt_step(backend):
    g = random_heterograph(3)
    torch.manual_seed(3)
    model = models.HGTConv(4, 4, len(g.ntypes), len(g.canonical_etypes), 2).double()
    x = torch.randn(g.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    return model, g, x, gnnc.compile(model, backend)


def test_a_compiled_training_step_is_recorded_by_stage_and_adds_up():
    driver.clear_cache()
    _, g, x, compiled = _hgt_step(backend="torch")
    steps = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        for name in ("first", "second"):
            with stage_timings.recording() as steps[name], driver.recording() as plans:
                compiled(g, x).sum().backward()
            assert plans and all(p.module is not None for p in plans)  # the compiled path ran
    first, second = steps["first"].table(), steps["second"].table()
    for stage in ("reach fingerprint", "tracing", "shape inference", "lowering", "plan run", "graph preparation"):
        assert stage in first, stage
    assert any(name.startswith("pass ") for name in first)
    assert not any(name.startswith("pass ") or name == "tracing" for name in second)  # plans are cached
    for times in steps.values():
        assert sum(times.table().values()) == pytest.approx(times.wall, abs=1e-9)
    table = stage_timings.side_by_side(steps)
    assert table.splitlines()[0].split()[-2:] == ["first", "second"]
    assert table.splitlines()[-1].split()[0] == "wall"


def test_explain_timings_prints_the_first_and_second_step_by_stage():
    out = io.StringIO()
    args = ["explain", "--model", "rgcn", "--graph", "mag-replica", "--scale", "0.001", "--timings"]
    with contextlib.redirect_stdout(out):
        assert cli_main([*args, "--backend", "torch"]) == 0
    lines = [line for line in out.getvalue().splitlines() if not line.startswith("mag-replica")]
    assert lines[0].split()[-4:] == ["first", "step", "second", "step"]
    rows = {line.rsplit(None, 2)[0]: [float(v) for v in line.rsplit(None, 2)[1:]] for line in lines[1:]}
    assert {"tracing", "plan run", "wall", stage_timings.OUTSIDE} <= set(rows)
    for column in (0, 1):
        parts = sum(v[column] for name, v in rows.items() if name != "wall")
        assert parts == pytest.approx(rows["wall"][column], abs=0.002 * len(rows))  # printed to 1 ms


def _plans_and_annotations(monkeypatch):
    """The printed optimized plans of a compiled HGT step, the number of annotations compiling them took, and
    whether the step's output and gradients were eager's."""
    annotations = []
    monkeypatch.setattr(driver, "propagate_shapes", lambda *a: annotations.append(1) or propagate_shapes(*a))
    driver.clear_cache()
    model, g, x, compiled = _hgt_step(backend="torch")
    with warnings.catch_warnings(), driver.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = compiled(g, x)
    assert plans and all(p.dfg is not None for p in plans)
    eager = model(g, x)
    torch.testing.assert_close(out, eager, rtol=1e-6, atol=1e-9)
    params = [x, *model.parameters()]
    for c, e in zip(torch.autograd.grad(out.sum(), params), torch.autograd.grad(eager.sum(), params)):
        torch.testing.assert_close(c, e, rtol=1e-6, atol=1e-9)
    return [format_dfg(p.dfg) for p in plans], len(annotations)


def test_passes_that_change_nothing_are_not_annotated_and_the_plans_stay_the_same(monkeypatch):
    """The optimized plans, with their shapes and residencies, are those of annotating after every pass, with
    fewer annotations; their numbers are eager's."""
    plans, annotations = _plans_and_annotations(monkeypatch)

    def annotating_every_pass(self, name, dfg):
        if not self.options.get(name, True):
            return dfg, False
        dfg, changed = pipeline.PASSES[name](dfg)
        self.annotate(dfg)
        return dfg, changed

    monkeypatch.setattr(pipeline._Runner, "step", annotating_every_pass)
    every_pass, more = _plans_and_annotations(monkeypatch)
    assert plans == every_pass
    assert annotations < more


def test_shape_propagation_runs_on_one_thread_and_restores_the_count():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        with shapes._one_thread():
            seen.append(torch.get_num_threads())
        assert seen == [1] and torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), shapes._one_thread():
            raise RuntimeError("inside")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
