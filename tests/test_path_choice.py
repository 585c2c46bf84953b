"""The measured choice between a compiled model's plans and the eager executor (issue 45: compile where it pays).

No test times real code: a fake clock stands in for ``time.perf_counter`` and advances only where a test makes
one path slow (each compiled plan run, or each eager message computation), so the medians and the choice are
exact.
"""

from __future__ import annotations

import copy

import pytest
import torch

import gnnc
from gnnc import cli, data, path_choice
from gnnc.compiler import driver
from gnnc.compiler.driver import recording
from gnnc.models import GCN
from gnnc.runtime import eager
from gnnc.training import train_node_classifier


class FakeClock:
    """``time.perf_counter`` that moves only when a slowed path calls ``tick``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(path_choice, "perf_counter", fake)
    return fake


def slow(monkeypatch, clock, module, name: str, seconds: float) -> None:
    """Every call of ``module.name`` costs ``seconds`` on ``clock``."""
    real = getattr(module, name)

    def slowed(*args, **kwargs):
        clock.tick(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slowed)


@pytest.fixture
def slow_compiled(monkeypatch, clock):
    slow(monkeypatch, clock, driver, "run_plan", 1.0)  # every compiled plan's run
    return clock


@pytest.fixture
def slow_eager(monkeypatch, clock):
    slow(monkeypatch, clock, eager, "messages", 1.0)  # every eager message computation
    return clock


@pytest.fixture(scope="module")
def replica():
    ds = data.synthetic("cora", scale=0.05, seed=0)
    return ds.graph.add_self_loop(), ds.num_classes


def gcn(replica, seed: int = 0) -> GCN:
    g, classes = replica
    torch.manual_seed(seed)
    return GCN(g.ndata["feat"].shape[1], 8, classes)


def training_step(model, g):
    """One forward with dropout and a backward, as an epoch's train step runs them."""

    def step():
        model.train()
        model(g, g.ndata["feat"]).square().sum().backward()

    return step


def test_picks_eager_where_compiled_is_slower(replica, slow_compiled):
    g, _ = replica
    compiled = gnnc.compile(gcn(replica))
    choice = compiled.choose_path(training_step(compiled, g), what="a step", warmup=1, calls=3)
    assert choice.path == compiled.path == "eager"
    assert choice.eager_s == (0.0, 0.0, 0.0) and choice.compiled_median == 2.0, choice  # two layers, a plan each
    assert str(choice) == "eager (a step, median of 3 after 1 warm-up: compiled 2000.0 ms, eager 0.0 ms)"
    compiled.eval()
    with recording() as plans, torch.no_grad():
        out = compiled(g, g.ndata["feat"])
        expected = compiled.model(g, g.ndata["feat"])
    assert not plans, "the eager path runs no compiled plan"
    assert torch.equal(out, expected)


def test_picks_compiled_where_eager_is_slower(replica, slow_eager):
    g, _ = replica
    compiled = gnnc.compile(gcn(replica))
    choice = compiled.choose_path(training_step(compiled, g), what="a step")
    assert choice.path == compiled.path == "compiled"
    assert choice.compiled_s == (0.0,) * 5 and choice.eager_median == 2.0, choice
    with recording() as plans:
        compiled(g, g.ndata["feat"])
    assert plans and all(p.dfg is not None for p in plans), "the compiled path ran its plans"


def test_a_tie_keeps_compiled(replica, clock):
    g, _ = replica
    compiled = gnnc.compile(gcn(replica))
    assert compiled.choose_path(training_step(compiled, g), warmup=0, calls=1).path == "compiled"


def test_measuring_leaves_random_state_gradients_and_flags_as_they_were(replica, slow_compiled):
    g, _ = replica
    compiled = gnnc.compile(gcn(replica))
    compiled.eval()
    rng = torch.get_rng_state()
    compiled.choose_path(training_step(compiled, g), warmup=1, calls=1)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None for p in compiled.parameters())
    assert not any(m.training for m in compiled.modules())


def test_measure_refuses_no_timed_call():
    with pytest.raises(ValueError, match="calls >= 1"):
        path_choice.measure(lambda path: None, torch.nn.Linear(1, 1), what="x", calls=0)


def test_path_is_compiled_or_eager():
    compiled = gnnc.compile(torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match="one of"):
        compiled.path = "fast"


def trained(replica, choose_path: bool, path: str | None = None) -> tuple[list[torch.Tensor], object]:
    """A GCN trained 3 epochs compiled, its path chosen by measurement or forced; its parameters and result."""
    g, _ = replica
    model = gnnc.compile(gcn(replica))
    if path is not None:
        model.path = path
    masks = {k: g.ndata[f"{k}_mask"] for k in ("train", "val", "test")}
    torch.manual_seed(1)
    result = train_node_classifier(
        model, g, g.ndata["feat"], g.ndata["label"], masks, epochs=3, progress=False, choose_path=choose_path
    )
    return [p.detach().clone() for p in model.parameters()], result


@pytest.mark.parametrize("slowed, chosen", [("slow_compiled", "eager"), ("slow_eager", "compiled")])
def test_training_numbers_are_those_of_the_chosen_path(replica, slowed, chosen, request):
    request.getfixturevalue(slowed)
    params, result = trained(replica, choose_path=True)
    assert result.path == chosen and result.choice.path == chosen and len(result.epoch_seconds) == 3
    forced, forced_result = trained(replica, choose_path=False, path=chosen)
    assert forced_result.choice is None and forced_result.path == chosen
    for a, b in zip(params, forced, strict=True):
        assert torch.equal(a, b)  # bit for bit: the measurement's calls left nothing behind
    assert (result.best_epoch, result.val_acc, result.test_acc) == (
        forced_result.best_epoch,
        forced_result.val_acc,
        forced_result.test_acc,
    )


def test_choose_path_needs_a_compiled_model(replica):
    g, _ = replica
    with pytest.raises(TypeError, match="gnnc.compile"):
        train_node_classifier(
            gcn(replica), g, g.ndata["feat"], g.ndata["label"], {"train": 0, "val": 0, "test": 0}, choose_path=True
        )


REPLICA_RUN = ["train", "--dataset", "cora-replica", "--scale", "0.05", "--epochs", "2", "--quiet"]


def test_train_prints_the_measured_choice(slow_compiled, capsys):
    assert cli.main(REPLICA_RUN) == 0
    out = capsys.readouterr().out
    path_line = next(line for line in out.splitlines() if line.startswith("path: "))
    assert path_line.startswith("path: eager (one training epoch, median of 5 after 2 warm-up: compiled "), out
    assert path_line.endswith(", eager 0.0 ms); --no-compile or --compile always forces one"), out
    assert "GCN on cora-replica (eager: measured faster): test accuracy" in out


@pytest.mark.parametrize(
    "flags, env, note",
    [
        (["--no-compile"], None, "eager: --no-compile"),
        (["--compile", "always"], None, "compiled: --compile always"),
        ([], "always", "compiled: --compile always"),
        ([], "never", "eager: --no-compile"),
        (["--compile"], "never", "compiled"),  # the flag wins; bare --compile is auto
    ],
)
def test_forced_paths_are_not_measured(flags, env, note, monkeypatch, slow_eager, capsys):
    if env is None:
        monkeypatch.delenv("GNNC_COMPILE", raising=False)
    else:
        monkeypatch.setenv("GNNC_COMPILE", env)
    assert cli.main([*REPLICA_RUN, *flags]) == 0
    out = capsys.readouterr().out
    assert f"GCN on cora-replica ({note}): test accuracy" in out
    assert ("path: " in out) == (note == "compiled"), out


def test_a_bad_compile_environment_is_named(monkeypatch, capsys):
    monkeypatch.setenv("GNNC_COMPILE", "sometimes")
    assert cli.main(REPLICA_RUN) == 2
    err = capsys.readouterr().err
    assert "$GNNC_COMPILE is 'sometimes'" in err and "one of never, always, auto" in err


def test_explain_says_which_path_would_run(replica, slow_compiled):
    g, _ = replica
    model = copy.deepcopy(gcn(replica)).eval()
    text = gnnc.explain(model, g, g.ndata["feat"], measure_paths=True)
    assert text.splitlines()[-1] == (
        "== path: eager (one forward without gradients, median of 5 after 2 warm-up: compiled 2000.0 ms, "
        "eager 0.0 ms): compiling loses on this model and graph"
    )
    assert "== path" not in gnnc.explain(model, g, g.ndata["feat"])


def test_explain_command_measures(capsys):
    assert cli.main(["explain", "--model", "gcn", "--scale", "0.01"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(("== path: compiled (one forward", "== path: eager (one forward")), last
