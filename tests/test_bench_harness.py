"""Benchmark harness (bench/harness): the equivalence gate, runner rows and failures, the floor, `gnnc bench`."""

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.graphs import random_heterograph, random_homograph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness import datasets, equivalence, floor, profiling, report, runner, torch_logs, worker  # bench/ is no package
from harness.case import Case, Prepared
from harness.datasets import BenchData
from harness.models import MODELS
from harness.pyg_models import PYG, PYG_FAST, Pairing
from harness.systems import SYSTEMS, System


def _case(model: str) -> Case:
    """``model`` on an awkward tiny graph (zero in-degrees, self loops, multi-edges, an empty relation)."""
    if MODELS[model].kind == "homogeneous":
        g, width = random_homograph(30, 120, seed=1), 12
    else:
        g, width = random_heterograph(seed=1), 64  # HGT's gated skip needs in == out
    x = torch.randn(g.num_nodes(), width, generator=torch.Generator().manual_seed(2))
    return Case.build(MODELS[model], BenchData("tiny", g, x, "test"), seed=0)


@pytest.mark.parametrize("system, model", [("pyg", m) for m in PYG] + [("pyg-fast", m) for m in PYG_FAST])
def test_every_pyg_pairing_computes_our_function(system, model):
    pytest.importorskip("torch_geometric")
    case = _case(model)
    verdict = equivalence.check(
        SYSTEMS["eager"].prepare(case), SYSTEMS[system].prepare(case), case.data.x, gradients=True
    )
    assert verdict["status"] == "ok", verdict


def test_gate_catches_pygs_own_gcn_normalisation_on_a_directed_graph():
    nn = pytest.importorskip("torch_geometric.nn")
    case = _case("gcn")
    src, dst = case.data.graph.find_edges()
    conv = nn.GCNConv(12, 64, add_self_loops=False)  # normalize=True: in-degree at both ends
    with torch.no_grad():
        conv.lin.weight.copy_(case.eager.weight.T)
        conv.bias.copy_(case.eager.bias)
    mismatched = Prepared(conv, lambda x: conv(x, torch.stack([src, dst])), lambda out: out)
    verdict = equivalence.check(SYSTEMS["eager"].prepare(case), mismatched, case.data.x)
    assert verdict["status"] == "MISMATCH" and "outputs differ" in verdict["detail"]


def test_error_ratio_judges_small_entries_against_the_tensor_scale():
    expected = torch.tensor([100.0, 0.0])
    assert equivalence.error_ratio(torch.tensor([100.0, 0.009]), expected) < 1  # 0.009 <= 1e-4 * 100
    assert equivalence.error_ratio(torch.tensor([100.0, 0.011]), expected) > 1
    assert equivalence.error_ratio(torch.tensor([100.0]), expected) == float("inf")


def test_a_differs_pairing_is_marked_and_not_checked(monkeypatch, tmp_path):
    pairing = Pairing("SomeConv", lambda case: None, "note", differs="softmax per relation")
    monkeypatch.setitem(SYSTEMS, "other", System("other", "", lambda case: None, pairing=lambda m: pairing))
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager", "other"])
    g = runner.gate(settings, runner.Scratch(settings, tmp_path), "gcn", "pubmed", ["eager", "other"])
    assert g.oracle_file is None  # nothing to check: no oracle run
    for mode in settings.modes:
        assert g.verdicts[mode] == {"other": {"status": "DIFFERS", "detail": "softmax per relation"}}


def test_runner_appends_json_rows_checked_after_timing_and_writes_profiles(tmp_path):
    pytest.importorskip("torch_geometric")
    settings = runner.Settings(
        models=["gcn"],
        datasets=["pubmed"],
        systems=["eager", "pyg"],
        modes=["training"],
        quick=True,
        warmup=1,
        runs=2,
        min_runs=2,
        budget_s=1.0,
        timeout_s=60.0,
        data_root=str(tmp_path),
        scale=0.005,
        threads=1,
        command="test",
        profile_dir=str(tmp_path / "profiles"),
        profile_calls=2,
    )
    runner.run(settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None)
    record = json.loads((tmp_path / "results.json").read_text())["runs"][-1]
    assert {"cpu", "cores", "torch", "gnnc", "numba", "git_commit"} <= set(record["machine"])
    assert record["rates"]["copy_bytes_per_s"] > 0 and record["rates"]["matmul_flops_per_s"] > 0
    eager, pyg = record["rows"]
    for row in (eager, pyg):
        assert row["status"] == "ok", row
        assert len(row["times_ms"]) == 2 and row["time_ms"] == pytest.approx(sum(row["times_ms"]) / 2)
        assert row["peak_mib"] >= 0 and row["nodes"] == 99 and row["edges"] == 443
        assert row["steady_peak_mib"] >= 0 and "retained_mib" in row
    assert (eager["model"], eager["dataset"], eager["mode"], eager["system"]) == ("gcn", "pubmed", "training", "eager")
    assert "check" not in eager  # the oracle itself
    # Checked in its timing subprocess after two SGD steps: passes only on the restored parameters.
    assert pyg["check"]["status"] == "ok" and pyg["check"]["checked_at"] == "run size", pyg["check"]
    assert pyg["check"]["grad_err"] <= 1
    w = floor.work("gcn", "training", floor.Shape(**eager["shape"]))
    assert (eager["work_flops"], eager["work_bytes"]) == (w.flops, w.bytes)
    assert eager["x_floor"] == pytest.approx(eager["time_ms"] / eager["floor_ms"])
    text = (tmp_path / "profiles" / "gcn-pubmed-training.txt").read_text()
    assert text.index("== eager: median") < text.index("== pyg: median")
    assert "2 profiled calls" in text and "aten::mm" in text


def _fake_subprocesses(monkeypatch, answers: dict) -> list:
    """``runner.run_in_subprocess`` answering ``answers[task name](cfg)``; returns the calls' (task, cfg)."""
    calls = []

    def fake(task, cfg, timeout_s, mem_cap_bytes=None, device="cpu"):
        calls.append((task.__name__, cfg))
        return answers[task.__name__](cfg)

    monkeypatch.setattr(runner, "run_in_subprocess", fake)
    return calls


def test_a_failed_check_after_timing_drops_the_times(monkeypatch, tmp_path):
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager", "pyg"], quick=True)
    mismatch = {"status": "MISMATCH", "output_err": 3.0, "detail": "outputs differ"}
    _fake_subprocesses(
        monkeypatch,
        {
            "build_dataset": lambda cfg: {"status": "ok"},
            "time_config": lambda cfg: {
                "status": "ok",
                "time_ms": 1.0,
                "times_ms": [1.0],
                "peak_mib": 2.0,
                "check": dict(mismatch),
            },
        },
    )
    row = runner._timed(
        settings, runner.Scratch(settings, tmp_path), "gcn", "pubmed", "inference", "pyg", oracle_file="oracle.pt"
    )
    assert row["status"] == "MISMATCH" and row["check"] == {**mismatch, "checked_at": "run size"}
    assert not set(runner.UNTIMED_FIELDS) & set(row)


def test_each_dataset_is_built_once_per_run_and_handed_to_every_task(monkeypatch, tmp_path):
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager"], quick=True)
    calls = _fake_subprocesses(monkeypatch, {"build_dataset": lambda cfg: {"status": "ok"}})
    scratch = runner.Scratch(settings, tmp_path)
    first = scratch.task("gcn", "pubmed", True)
    assert scratch.task("gat", "pubmed", True)["data_file"] == first["data_file"] == calls[0][1]["path"]
    assert scratch.task("gcn", "pubmed", False)["data_file"] != first["data_file"]  # full size: its own file
    assert [task for task, _ in calls] == ["build_dataset", "build_dataset"]


def test_a_dataset_that_cannot_be_built_once_is_left_to_each_task(monkeypatch, tmp_path):
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager"], quick=True)
    _fake_subprocesses(monkeypatch, {"build_dataset": lambda cfg: {"status": "OOM", "error": "big"}})
    assert runner.Scratch(settings, tmp_path).task("gcn", "pubmed", True)["data_file"] is None


def test_a_saved_dataset_loads_back_equal(tmp_path):
    g = random_homograph(12, 30, seed=3)
    data = BenchData("tiny", g, torch.randn(12, 4), "test")
    datasets.save(data, tmp_path / "d.pt")
    back = datasets.load_saved(tmp_path / "d.pt")
    assert back.name == "tiny" and back.size == "test" and torch.equal(back.x, data.x)
    assert all(torch.equal(a, b) for a, b in zip(back.graph.find_edges(), g.find_edges()))
    torch.save({"not": "data"}, tmp_path / "other.pt")
    with pytest.raises(TypeError, match="not a saved benchmark dataset"):
        datasets.load_saved(tmp_path / "other.pt")


def _quick_full_gate(monkeypatch, tmp_path, oracle_status: dict, check: dict):
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager", "pyg"], quick=False)
    calls = _fake_subprocesses(
        monkeypatch,
        {
            "build_dataset": lambda cfg: {"status": "ok"},
            "oracle_config": lambda cfg: {"status": oracle_status[cfg["size_quick"]], "error": "x"},
            "check_config": lambda cfg: check,
        },
    )
    return runner.gate(settings, runner.Scratch(settings, tmp_path), "gcn", "pubmed", ["eager", "pyg"]), calls


def test_when_the_oracle_cannot_run_at_full_size_systems_are_checked_at_quick_size(monkeypatch, tmp_path):
    ok = {"status": "ok", "output_err": 0.1, "detail": ""}
    g, calls = _quick_full_gate(
        monkeypatch,
        tmp_path,
        {False: "TIMEOUT", True: "ok"},
        {"status": "ok", "verdicts": {"inference": ok, "training": ok}},
    )
    assert g.oracle_file is None  # nothing left to check after timing
    assert g.verdicts["training"]["pyg"] == {**ok, "checked_at": "quick size"}
    (check_cfg,) = [cfg for task, cfg in calls if task == "check_config"]
    assert check_cfg["size_quick"] and check_cfg["system"] == "pyg"


def test_without_any_oracle_the_systems_are_unchecked(monkeypatch, tmp_path):
    g, _ = _quick_full_gate(monkeypatch, tmp_path, {False: "OOM", True: "TIMEOUT"}, {})
    assert g.verdicts["inference"]["pyg"]["status"] == "UNCHECKED"
    assert "oracle could not run: TIMEOUT" in g.verdicts["inference"]["pyg"]["detail"]


def test_the_check_after_timing_catches_a_wrong_system_and_passes_a_right_one(monkeypatch, tmp_path):
    """In-process: oracle saved, then each system timed (training: SGD steps) and checked."""

    def scaled(factor):
        def prepare(case):
            p = SYSTEMS["eager"].prepare(case)
            return Prepared(p.module, lambda x: p.call(x) * factor, p.view)

        return System("scaled", "", prepare)

    settings = runner.Settings(
        models=["gcn"],
        datasets=["pubmed"],
        systems=["eager"],
        quick=True,
        warmup=1,
        runs=3,
        min_runs=3,
        data_root=str(tmp_path),
        scale=0.005,
        threads=1,
    )
    oracle = str(tmp_path / "oracle.pt")
    worker.oracle_config(
        runner.task_config(settings, "gcn", "pubmed", True, modes=list(worker.MODES), oracle_file=oracle)
    )
    for factor, status in ((1.0, "ok"), (1.001, "MISMATCH")):
        monkeypatch.setitem(SYSTEMS, "scaled", scaled(factor))
        for mode in worker.MODES:
            cfg = runner.task_config(settings, "gcn", "pubmed", True, system="scaled", mode=mode, oracle_file=oracle)
            result = worker.time_config(cfg)
            assert result["status"] == "ok" and result["check"]["status"] == status, (factor, mode, result)


def test_a_configuration_past_its_timeout_is_recorded_not_raised():
    # the child would sleep ten minutes; the runner must kill it, not wait (the margin absorbs a slow start
    # of the forkserver on a loaded machine, which counted against an earlier 30 s bound)
    start = time.monotonic()
    assert runner.run_in_subprocess(time.sleep, 600, timeout_s=1.0)["status"] == "TIMEOUT"
    assert time.monotonic() - start < 300


def _compiles_with_a_graph_break(arg) -> dict:
    """What pyg-compile's subprocess meets: dynamo's graph-break warning, and a torch.fx Interpreter run."""
    import logging

    from tqdm import tqdm

    logging.getLogger("torch._dynamo.variables.tensor").warning("Graph break from `Tensor.item()`, consider:\n...")
    torch.fx.Interpreter(torch.fx.symbolic_trace(torch.nn.ReLU())).run(torch.ones(2))
    return {"status": "ok", "tqdm_lock": type(tqdm.get_lock()).__name__}


def test_a_subprocess_keeps_torchs_warnings_for_the_report_and_holds_no_named_semaphore():
    result = runner.run_in_subprocess(_compiles_with_a_graph_break, None, timeout_s=300.0)
    assert result["torch_warnings"] == ["Graph break from `Tensor.item()`, consider:\n..."], result
    # tqdm's default lock (TqdmDefaultWriteLock) holds a named semaphore a killed child leaks to the parent
    assert result["tqdm_lock"] != "TqdmDefaultWriteLock"
    rows = [{"system": "pyg-compile", "torch_warnings": result["torch_warnings"] * 2}, {"system": "compiled"}]
    line = torch_logs.summary(rows)
    assert line.startswith("torch logged 2 warnings in the timed subprocesses (pyg-compile 2)"), line
    assert line.endswith(": 2 x Graph break from `Tensor.item()`, consider."), line
    assert torch_logs.summary(rows[1:]) is None


def test_torch_warnings_are_caught_not_printed(capsys):
    import logging

    with torch_logs.caught() as warned:
        logging.getLogger("torch._inductor").warning("inductor says %s", "so")
        logging.getLogger("torch._dynamo").info("not a warning")
    logging.getLogger("unrelated").warning("left alone")
    assert warned == ["inductor says so"]
    assert all(type(h) is not torch_logs._Recorder for h in logging.getLogger("torch._inductor").handlers)


def test_an_allocation_over_the_memory_cap_is_recorded_as_oom():
    result = runner.run_in_subprocess(torch.ones, 2**30, timeout_s=60.0, mem_cap_bytes=2**28)
    assert result["status"] == "OOM", result


def test_floor_of_a_gcn_layer_by_hand():
    s = floor.Shape(nodes=10, edges=30, relations=1, src_pairs=8, dst_pairs=9, in_dim=16, params=16 * 64 + 64)
    inference = floor.work("gcn", "inference", s)
    assert inference.flops == 2 * 10 * 16 * 64 + 30 + 2 * 30 * 64 == 24350  # x W, c_u c_v, scaled sum
    assert inference.bytes == 4 * (10 * 16 + 10 * 64 + 1088) + 4 * (11 + 30) == 7716  # x, out, params, CSR
    training = floor.work("gcn", "training", s)
    assert (training.flops, training.bytes) == (2 * 24350, 2 * 7716 + 16 * 1088)
    assert floor.floor_seconds(inference, {"copy_bytes_per_s": 1e3, "matmul_flops_per_s": 1e6}) == 7.716
    assert floor.floor_seconds(inference, {"copy_bytes_per_s": 1e9, "matmul_flops_per_s": 1e3}) == 24.35


def test_floor_shape_counts_distinct_source_and_destination_relation_pairs():
    import gnnc

    g = gnnc.heterograph(
        {("a", "r", "a"): ([0, 0, 0], [0, 1, 2]), ("a", "s", "a"): ([1, 1], [0, 0])}, num_nodes={"a": 3}
    )
    assert floor.shape_of(g, in_dim=4, params=7) == floor.Shape(3, 5, 2, src_pairs=2, dst_pairs=4, in_dim=4, params=7)


def test_gnnc_bench_parses_its_options_and_explains_a_missing_bench_folder(monkeypatch, tmp_path):
    from gnnc.cli import bench as bench_cli

    def parse(argv):
        parser = argparse.ArgumentParser()
        bench_cli.add_parser(parser.add_subparsers())
        return parser.parse_args(argv)

    args = parse(["bench", "--quick", "--models", "gcn", "rgcn", "--systems", "eager", "--out", "x"])
    assert args.quick and args.models == ["gcn", "rgcn"] and args.systems == ["eager"] and args.out == Path("x")
    monkeypatch.setattr(bench_cli, "bench_dir", lambda: tmp_path / "bench")
    args = parse(["bench", "--quick", "--models", "gcn"])
    with pytest.raises(SystemExit, match="not installed with the package"):
        args.func(args)


def test_a_profile_counts_operators_per_call_and_adds_up_to_its_wall_time():
    a = torch.randn(64, 64)
    p = profiling.profile_calls(lambda: (a @ a) @ a, calls=2, rows=5)
    assert p["calls"] == 2 and 0 < p["operator_ms"] <= p["wall_ms"]
    assert {name: count for name, _, count in p["operators"]}["aten::mm"] == 2.0  # two products per call
    text = profiling.format_section("compiled", 1.5, {"status": "ok", **p})
    assert text.startswith("== compiled: median 1.5 ms timed; 2 profiled calls")
    outside = next(line for line in text.splitlines() if "outside any recorded operator" in line)
    assert float(outside.split()[0]) == pytest.approx(p["wall_ms"] - p["operator_ms"], abs=1e-3)
    with pytest.raises(ValueError, match="at least 1"):
        profiling.profile_calls(lambda: None, calls=0)


def test_profile_files_hold_one_section_per_system_of_a_row(tmp_path):
    files = profiling.ProfileFiles(tmp_path / "profiles")
    row = {"model": "gmm", "dataset": "cora", "mode": "inference"}
    ok = {"status": "ok", "calls": 3, "wall_ms": 2.0, "operator_ms": 1.5, "operators": [["aten::mm", 1.0, 1.0]]}
    files.add({**row, "system": "compiled", "time_ms": 2.5}, ok)
    path = files.add({**row, "system": "pyg", "time_ms": 1.0}, {"status": "OOM", "error": "MemoryError"})
    assert path == tmp_path / "profiles" / "gmm-cora-inference.txt"
    text = path.read_text()
    assert text.startswith("# gmm on cora, inference")
    assert text.index("== compiled: median 2.5 ms") < text.index("== pyg: median 1 ms timed; no profile: OOM")
    assert "1.000   50.0%         1.0  aten::mm" in text


def test_bench_profile_options_reach_the_settings():
    from harness import cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    settings = cli.settings_from(parser.parse_args(["--quick", "--profile", "--profile-calls", "2"]), "test")
    assert settings.profile_dir.endswith("profiles") and settings.profile_calls == 2
    assert cli.settings_from(parser.parse_args(["--quick"]), "test").profile_dir is None
    settings.profile_calls = 0
    with pytest.raises(SystemExit, match="--profile-calls must be at least 1"):
        runner.validate(settings)


def _doubling(grad_scale=lambda: 1.0) -> Prepared:
    """``2 x``, whose input gradient is scaled by ``grad_scale()`` (outputs unchanged)."""
    module = torch.nn.Identity()
    return Prepared(module, lambda x: 2 * x + (grad_scale() - 1) * 2 * (x - x.detach()), lambda out: out)


def test_a_gradient_only_mismatch_is_rechecked_at_other_jitter_points():
    x = torch.randn(10, 4)
    calls = []

    def wrong_on_the_first_call():  # as a near-tie at the first jitter point would be
        calls.append(1)
        return 1.5 if len(calls) == 1 else 1.0

    near_tie_once = _doubling(wrong_on_the_first_call)
    first = equivalence.check(_doubling(), near_tie_once, x, seed=0, gradients=True)
    assert equivalence.only_gradients_differ(first)
    verdict = equivalence.recheck(_doubling(), near_tie_once, x, 0, first)
    assert verdict["status"] == "ok" and verdict["jitter_seed"] == equivalence.RETRY_SEED_STEP
    assert "at seed 0 input gradients" in verdict["detail"]

    always_wrong = _doubling(lambda: 1.5)
    first = equivalence.check(_doubling(), always_wrong, x, seed=0, gradients=True)
    verdict = equivalence.recheck(_doubling(), always_wrong, x, 0, first)
    assert verdict["status"] == "MISMATCH" and "also at 2 further jitter points" in verdict["detail"]

    wrong_outputs = Prepared(torch.nn.Identity(), lambda x: 3 * x, lambda out: out)
    first = equivalence.check(_doubling(), wrong_outputs, x, seed=0, gradients=True)
    assert equivalence.recheck(_doubling(), wrong_outputs, x, 0, first) is first  # no retry: outputs differ


def test_the_table_says_when_gradients_agreed_only_at_another_jitter_point():
    from harness import report

    check = {
        "status": "ok",
        "output_err": 0.1,
        "grad_err": 0.2,
        "jitter_seed": 1000,
        "checked_at": "run size",
        "detail": "agreed at jitter seed 1000; at seed 0 input gradients 225x tol",
    }
    row = {
        "model": "edgeconv",
        "dataset": "pubmed",
        "mode": "training",
        "system": "compiled",
        "status": "ok",
        "time_ms": 1.0,
        "peak_mib": 1.0,
        "steady_peak_mib": 0.5,
        "check": check,
    }
    header, _, line = report.mode_table([row], "training")
    assert "| peak (MiB) | steady peak (MiB) |" in header and "| 1 | 0.5 |" in line
    assert line.endswith("| ok, err 0.2 of tol (agreed at jitter seed 1000; at seed 0 input gradients 225x tol) |")


def test_the_summary_sets_gnnc_against_the_fastest_and_leanest_matching_peer():
    from harness import report

    ok = {"status": "ok"}

    def row(system, dataset, ms, mib, check=ok):
        return {
            "model": "gcn",
            "dataset": dataset,
            "mode": "inference",
            "system": system,
            "status": "ok",
            "time_ms": ms,
            "peak_mib": mib,
            "check": check,
        }

    rows = [
        row("compiled", "cora", 2.0, 10.0),
        row("pyg", "cora", 4.0, 20.0),
        row("dgl", "cora", 8.0, 5.0),
        row("compiled", "pubmed", 6.0, 30.0),
        row("pyg-compile", "pubmed", 3.0, 60.0),
        row("dgl", "pubmed", 1.0, 1.0, {"status": "DIFFERS", "detail": "other function"}),
        row("eager", "pubmed", 0.5, 1.0),  # not a peer
        row("compiled", "arxiv", 1.0, 1.0),
    ]  # no peer ran: not counted
    header, _, line = report.summary_table(rows, ["inference"])
    # cora: 2/4 and 10/5; pubmed: 6/3 and 30/60 (the differing DGL row and eager are no peers)
    assert line == "| GCN | inference | 2 | 1.25x | 1.25x | pubmed (pyg-compile, 2.00x) |"


def test_git_commit_follows_a_worktree_to_its_shared_refs(tmp_path):
    from harness.machine import git_commit

    if shutil.which("git") is None:
        pytest.skip("needs the git command to build a worktree")

    def git(*args, cwd=tmp_path / "repo"):
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=cwd,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    (tmp_path / "repo").mkdir()
    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "first")
    git("worktree", "add", "-q", str(tmp_path / "wt"))  # on a new branch: its ref is in the main .git
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=tmp_path / "wt")
    assert git_commit(tmp_path / "wt") == git("rev-parse", "HEAD", cwd=tmp_path / "wt")
    assert git_commit(tmp_path / "repo") == git("rev-parse", "HEAD") != git_commit(tmp_path / "wt")


def _file_mapping_kib() -> tuple[int, int]:
    """(Size, Rss) in KiB summed over the readable mappings of regular files, from ``/proc/self/smaps``."""
    size = rss = 0
    counted = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):  # a mapping's header line
                counted = (
                    len(head) >= 6
                    and head[1].startswith("r")
                    and head[4] != "0"
                    and head[5].startswith("/")
                    and not head[5].startswith("/dev/")
                )
            elif counted and head[0] == "Size:":
                size += int(head[1])
            elif counted and head[0] == "Rss:":
                rss += int(head[1])
    return size, rss


def test_map_file_pages_makes_library_code_resident_in_a_forked_child():
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / 'bench')!r})\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "import torch\n"
        "from harness import procfs\n"
        "from tests.test_bench_harness import _file_mapping_kib\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    size, before = _file_mapping_kib()\n"
        "    mapped = procfs.map_file_pages()\n"
        "    _, after = _file_mapping_kib()\n"
        "    print(size, before, after, mapped)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    size, before, after, mapped = out.split()
    if mapped != "True":
        pytest.skip("this kernel has no MADV_POPULATE_READ")
    size, before, after = int(size), int(before), int(after)
    assert before < 0.5 * size  # the fork left the parent's library pages out of the child's page tables
    assert after > 0.95 * size


def test_mag_replicas_with_and_without_reverse_relations_are_asked_for_by_name():
    plain = datasets.load("mag", True, 0, Path("."))
    rev = datasets.load("mag-rev", True, 0, Path("."))
    assert len(plain.graph.canonical_etypes) == 4 and len(rev.graph.canonical_etypes) == 7
    assert rev.graph.num_edges() > plain.graph.num_edges() and rev.x.shape == plain.x.shape
    assert "mag" not in datasets.DEFAULT_DATASETS and "mag-rev" not in datasets.DEFAULT_DATASETS


def test_a_scaled_run_gates_on_the_quick_scale_when_its_oracle_cannot_run():
    s = runner.Settings(models=["rgcn"], datasets=["mag"], systems=["eager", "compiled"], scale=0.25)
    assert runner.task_config(s, "rgcn", "mag", False)["scale"] == 0.25
    assert runner.task_config(s, "rgcn", "mag", True)["scale"] is None  # the fallback oracle's quick size


def test_ablation_systems_switch_one_pass_off_and_run_only_when_named():
    for name in ("compiled-no-compact", "compiled-no-linear-reorder"):
        assert not SYSTEMS[name].default and SYSTEMS[name].compiles
    g = random_heterograph(1)
    case = Case.build(MODELS["rgcn"], BenchData("h", g, torch.randn(g.num_nodes(), 64), "test"), seed=0)
    prepared = SYSTEMS["compiled-no-compact"].prepare(case)
    assert prepared.module.options["compact"] is False
    torch.testing.assert_close(prepared.call(case.data.x), case.eager(g, case.data.x), rtol=1e-4, atol=1e-5)


class _Stopped(Exception):
    """Raised from ``on_row`` to stop a run the way a killed harness stops: rows so far are saved."""


def _faked_run(monkeypatch, tmp_path, settings, stop_after=None, resume=False):
    """``runner.run`` of ``settings`` with every subprocess faked (each timed row takes 1 ms); returns the task
    names run and the saved run records."""
    monkeypatch.setattr(
        runner.machine, "measure_rates", lambda device: {"copy_bytes_per_s": 1e10, "matmul_flops_per_s": 1e11}
    )
    calls = _fake_subprocesses(
        monkeypatch,
        {
            "build_dataset": lambda cfg: {"status": "ok"},
            "oracle_config": lambda cfg: {"status": "ok"},
            "time_config": lambda cfg: {
                "status": "ok",
                "time_ms": 1.0,
                "times_ms": [1.0],
                "peak_mib": 2.0,
                **({"check": {"status": "ok", "output_err": 0.0}} if cfg.get("oracle_file") else {}),
            },
        },
    )

    def on_row(record):
        if stop_after is not None and len(record["rows"]) == stop_after:
            raise _Stopped

    try:
        runner.run(
            settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None, on_row=on_row, resume=resume
        )
    except _Stopped:
        pass
    return calls, json.loads((tmp_path / "results.json").read_text())["runs"]


def _resumable_settings(**changes) -> runner.Settings:
    return runner.Settings(
        **{
            "models": ["gcn", "gat"],
            "datasets": ["pubmed"],
            "systems": ["eager", "pyg"],
            "quick": True,
            "command": "first",
            **changes,
        }
    )


def test_a_resumed_run_keeps_its_rows_and_runs_only_the_configurations_left(monkeypatch, tmp_path):
    _, runs = _faked_run(monkeypatch, tmp_path, _resumable_settings(), stop_after=5)  # gat inference eager is done
    assert len(runs) == 1 and len(runs[0]["rows"]) == 5
    kept = [runner._key(row) for row in runs[0]["rows"]]
    calls, runs = _faked_run(monkeypatch, tmp_path, _resumable_settings(command="second"), resume=True)
    assert len(runs) == 1  # the same run, not a new one
    keys = [runner._key(row) for row in runs[0]["rows"]]
    assert keys[:5] == kept and len(keys) == len(set(keys)) == 8
    timed = [(cfg["model"], cfg["mode"], cfg["system"]) for task, cfg in calls if task == "time_config"]
    assert timed == [("gat", "inference", "pyg"), ("gat", "training", "eager"), ("gat", "training", "pyg")]
    assert [cfg["model"] for task, cfg in calls if task == "oracle_config"] == ["gat"]  # gcn's pair is whole
    (part,) = runs[0]["resumed"]
    assert part["command"] == "second" and runs[0]["settings"]["command"] == "first"
    assert "; resumed " in report.markdown(runs[0])


@pytest.mark.parametrize(
    "change, why",
    [
        ({"runs": 3}, "runs was 10, now 3"),
        ({"systems": ["eager"]}, "systems was ['eager', 'pyg'], now ['eager']"),
        ("source", "gnnc's source differs"),
    ],
)
def test_a_run_is_not_resumed_under_other_settings_or_another_gnnc(monkeypatch, tmp_path, change, why):
    _faked_run(monkeypatch, tmp_path, _resumable_settings(), stop_after=2)
    if change == "source":
        monkeypatch.setattr(runner.machine, "gnnc_source_digest", lambda: "another")
        change = {}
    with pytest.raises(SystemExit, match="cannot be resumed: .*" + re.escape(why)):
        _faked_run(monkeypatch, tmp_path, _resumable_settings(**change), resume=True)


def test_resume_without_a_run_to_resume_says_so(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="holds no run to resume"):
        _faked_run(monkeypatch, tmp_path, _resumable_settings(), resume=True)


def test_without_matplotlib_the_bench_says_why_there_are_no_plots_even_when_quiet(monkeypatch, tmp_path, capsys):
    from gnnc import progress
    from harness import cli, plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setenv("TQDM_DISABLE", "")
    monkeypatch.setattr(progress, "_quiet", False)
    monkeypatch.setattr(cli.runner, "validate", lambda settings: None)
    monkeypatch.setattr(cli.runner, "run", lambda *args, **kwargs: {"rows": []})
    monkeypatch.setattr(cli.report, "markdown", lambda record: "the table")
    monkeypatch.setattr(cli, "write_report", lambda record, out: plots.plot(record, out))
    assert cli.main(["--quick", "--quiet", "--systems", "eager", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out == "the table\n"
    assert err.splitlines() == [f"gnnc bench: no plots: {plots.missing()}"]
    assert "matplotlib is not installed" in err
