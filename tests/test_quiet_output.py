"""Quiet, honest output (issue 45): --quiet on every command, TQDM_DISABLE, no bar when stderr is not a
terminal (one line per epoch instead), the demo's spread and busy-machine warning, and ``gnnc train``
compiling by default."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnnc import cli, progress, spread

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _loud(monkeypatch):
    """Each test starts loud: neither --quiet from an earlier in-process run nor TQDM_DISABLE."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(progress, "_quiet", False)


def gnnc(*argv, env=None, timeout=600) -> subprocess.CompletedProcess:
    """``gnnc argv`` in a child process with pipes for stdout and stderr (not terminals)."""
    environ = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    environ.update(
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS="1",
        **(env or {}),
    )
    return subprocess.run(
        [sys.executable, "-m", "gnnc.cli", *argv],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def cora(shared_data) -> str:
    if not (shared_data / "planetoid" / "ind.cora.x").is_file():
        pytest.skip(f"the real cora files are not under {shared_data}")
    return str(shared_data)


def test_piped_training_prints_one_line_per_epoch_and_no_bar(cora):
    done = gnnc("train", "--dataset", "cora", "--epochs", "3", "--data-dir", cora)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "it/s" not in done.stderr
    epochs = [line for line in done.stderr.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"], done.stderr
    assert "path: " in done.stdout  # compiled by default, unless one epoch measured eagerly runs faster
    assert "GCN on cora (compiled): test accuracy" in done.stdout or "(eager: measured faster)" in done.stdout


@pytest.mark.parametrize("how", ["--quiet", "TQDM_DISABLE"])
def test_quiet_and_tqdm_disable_leave_results_only(cora, how):
    argv = ["train", "--dataset", "cora", "--epochs", "2", "--data-dir", cora, "--no-compile"]
    done = gnnc(*argv, "--quiet") if how == "--quiet" else gnnc(*argv, env={"TQDM_DISABLE": "1"})
    assert done.returncode == 0, done.stderr
    assert "epoch " not in done.stderr and "\r" not in done.stderr, done.stderr
    assert "GCN on cora (eager: --no-compile): test accuracy" in done.stdout


def test_every_command_takes_quiet():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, command in commands.items():
        if command.prefix_chars == "-":
            assert "--quiet" in command._option_string_actions, name
    assert parser.parse_args(["--quiet", "datasets"]).quiet
    assert parser.parse_args(["datasets", "--quiet"]).quiet


def test_train_compiles_unless_told_not_to(monkeypatch, shared_data, capsys):
    import gnnc.data
    import gnnc.training
    from gnnc.cli import train

    seen = []

    def experiment(*args, compile_mode, **kwargs):
        seen.append(compile_mode)
        return gnnc.training.TrainResult(1, 1, 0.5, 0.5, 0.1, path="eager" if compile_mode == "never" else "compiled")

    monkeypatch.setattr(train, "planetoid_experiment", experiment)
    monkeypatch.setattr(gnnc.data, "load_planetoid", lambda *a: _FakePlanetoid())
    monkeypatch.setattr(train, "real_path", lambda *a: Path("somewhere"))
    monkeypatch.delenv("GNNC_COMPILE", raising=False)
    assert cli.main(["train"]) == 0 and cli.main(["train", "--no-compile"]) == 0
    assert seen == ["auto", "never"]
    out = capsys.readouterr().out
    assert "(compiled)" in out and "(eager: --no-compile)" in out


class _FakePlanetoid:
    class graph:  # stands in for the dataset's graph attribute
        @staticmethod
        def num_nodes():
            return 3

        @staticmethod
        def num_edges():
            return 2


def test_bars_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not progress.bars() and progress.bar(range(3)).disable and list(progress.bar(range(3))) == [0, 1, 2]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress.bars() and not progress.bar(range(3)).disable
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress.quiet() and progress.bar(range(3)).disable
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert not progress.quiet()


def test_demo_prints_spread_and_keeps_bars_out_of_its_table():
    done = gnnc("demo", "--gat-scale", "0.005", "--rgcn-scale", "0.02", "--runs", "3")
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr
    assert "fewer threads" not in done.stderr  # a busy machine's advice, but the child runs one thread already
    lines = done.stdout.splitlines()
    assert "median (interquartile range) of 3 runs" in lines[0]
    rows = [line for line in lines if line.startswith(("GAT", "RGCN"))]
    timing = re.compile(r"\d+\.\d \(\d+\.\d-\d+\.\d\)")  # median (q1-q3)
    assert len(rows) == 2 and all(len(timing.findall(row)) == 4 and row.count("x |") == 2 for row in rows), lines


@pytest.mark.parametrize("load, threads, warned", [(0.0, 2, False), (2.5, 2, True), (1.0, 1, False)])
def test_busy_warning_compares_load_and_threads_with_the_cores(monkeypatch, load, threads, warned):
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    text = spread.busy_warning(threads)
    assert (text is not None) == warned
    if warned:
        assert f"load average {load:.1f} on 2 cores" in text and f"{threads} torch thread(s)" in text


def test_spread_is_median_and_quartiles(monkeypatch):
    ticks = iter([0, 1, 0, 3, 0, 2, 0, 10])  # perf_counter pairs: 1, 3, 2 and 10 seconds
    monkeypatch.setattr(spread.time, "perf_counter", lambda: next(ticks))
    s = spread.measure(lambda: None, 4, "test")
    assert (s.median, s.q1, s.q3) == (2500.0, 1750.0, 4750.0)
    assert str(s) == "2500.0 (1750.0-4750.0)"


CHILD = """
import multiprocessing as mp
import os
import signal

from gnnc import progress


def child():
    with progress.bar(total=3, desc="child") as bar:
        for _ in progress.bar(range(3)):
            bar.update(1)
    os.kill(os.getpid(), signal.SIGKILL)  # as the bench harness ends a subprocess past its timeout


if __name__ == "__main__":
    p = mp.get_context("forkserver").Process(target=child)
    p.start()
    p.join()
    print("child exit", p.exitcode)
"""


def test_no_leaked_semaphore_warnings_from_subprocesses_without_bars(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0 and "child exit -9" in done.stdout, done.stderr
    assert "resource_tracker" not in done.stderr and "leaked semaphore" not in done.stderr, done.stderr


SLOW_GC_TESTS = '''
import gc
import time

from hypothesis import given, strategies as st


def _slow_full_collections(phase, info):
    """A full collection over a large heap on a busy machine: 2 s while the generations hold the heap (a
    pytest worker imports some 45,000 objects; after gc.freeze a collection sees only newer ones)."""
    if phase == "start" and info["generation"] == 2 and len(gc.get_objects()) > 20_000:
        time.sleep(2)


gc.callbacks.append(_slow_full_collections)


@given(st.integers())
def test_hypothesis(n):
    assert n == n
'''


def test_a_worker_ends_without_keyboard_interrupt_after_slow_collections(tmp_path):
    """pytest's five full collections at a worker's config teardown come after the worker reported finished,
    and execnet interrupts a worker still running 5 s after that: with the session's plugin (tests/session_gc)
    the heap is collected before the report and frozen, so those collections are quick and nothing interrupts
    the worker; without it this run ends with hypothesis's gc callback's KeyboardInterrupt traceback."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.session_gc"]\n')
    (tmp_path / "test_slow_gc.py").write_text(SLOW_GC_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TQDM_DISABLE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    assert "KeyboardInterrupt" not in done.stdout + done.stderr, done.stdout + done.stderr
