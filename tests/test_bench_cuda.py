"""`gnnc bench --device cuda`: the plumbing, checked without a GPU (CUDA's functions monkeypatched where
needed), and one real run on a GPU when there is one."""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

from tests.test_bench_harness import _case

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness import cli, devices, machine, procfs, report, runner, timing, worker  # bench/ is no package
from harness.case import Case
from harness.datasets import BenchData
from harness.models import MODELS

GPU = torch.cuda.is_available()


def _args(argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_device_cuda_without_a_gpu_stops_at_once_with_one_line(monkeypatch, tmp_path, capsys):
    from gnnc import cli as gnnc_cli

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(machine, "measure_rates", lambda device="cpu": pytest.fail("the run went on"))
    out = tmp_path / "out"
    assert gnnc_cli.main(["bench", "--quick", "--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gnnc bench: --device cuda needs an NVIDIA GPU"), err
    assert "torch.cuda.is_available() is False" in err and torch.__version__ in err
    assert not out.exists()  # nothing written, nothing measured


def test_cuda_settings_leave_out_the_cpu_only_systems_and_say_why(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    settings = cli.settings_from(_args(["--quick", "--device", "cuda"]), "test")
    assert settings.device == "cuda" and settings.mem_cap_bytes is None and settings.host_cap_bytes is None
    assert not {"dgl", "dgl-udf"} & set(settings.systems)
    skipped = runner.not_run(settings)
    assert skipped["dgl"].startswith("runs on the CPU only: ") and "dgl-udf" in skipped
    assert cli.out_dir(_args(["--quick", "--device", "cuda"])).name == "quick-cuda"
    assert cli.out_dir(_args(["--quick"])).name == "quick"
    with pytest.raises(SystemExit, match="system 'dgl' cannot run here: runs on the CPU only"):
        runner.validate(dataclasses.replace(settings, systems=["eager", "dgl"]))
    with pytest.raises(SystemExit, match="--device cpu only"):
        runner.validate(dataclasses.replace(settings, profile_dir="profiles"))
    capped = cli.settings_from(_args(["--quick", "--device", "cuda", "--mem-limit-gb", "2"]), "test")
    assert capped.mem_cap_bytes == 2 * 2**30 and capped.host_cap_bytes is None
    cfg = runner.task_config(capped, "gcn", "pubmed", True)
    assert cfg["device"] == "cuda" and cfg["gpu_mem_cap_bytes"] == 2 * 2**30
    cpu = cli.settings_from(_args(["--quick"]), "test")
    assert (
        cpu.host_cap_bytes == cpu.mem_cap_bytes > 0
        and runner.task_config(cpu, "gcn", "pubmed", True)["gpu_mem_cap_bytes"] is None
    )


class FakeCuda:
    """torch.cuda's clock and memory functions, recording calls; ``allocate`` moves the allocator's counters."""

    def __init__(self, monkeypatch, log):
        self.log, self.allocated, self.peak = log, 0, 0
        for name in (
            "synchronize",
            "reset_peak_memory_stats",
            "memory_allocated",
            "max_memory_allocated",
            "get_device_name",
        ):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))

    def synchronize(self):
        self.log.append("sync")

    def reset_peak_memory_stats(self):
        self.log.append("reset")
        self.peak = self.allocated

    def memory_allocated(self):
        return self.allocated

    def max_memory_allocated(self):
        return self.peak

    def get_device_name(self):
        return "Fake GPU 80GB"

    def allocate(self, nbytes, keep):
        self.peak = max(self.peak, self.allocated + nbytes)
        self.allocated += keep


def test_timing_on_cuda_waits_for_the_gpu_and_reads_torch_cuda_memory(monkeypatch):
    log = []
    fake = FakeCuda(monkeypatch, log)
    monkeypatch.setattr(procfs, "reset_peak", lambda: pytest.fail("host memory read on cuda"))
    calls = []

    def step():  # the first call keeps 1 MiB (a plan); every call needs 4 MiB of temporaries
        log.append("step")
        fake.allocate(4 * 2**20, 2**20 if not calls else 0)
        calls.append(1)

    res = timing.timed_calls(step, {"device": "cuda", "warmup": 1, "runs": 3, "min_runs": 3, "budget_s": 0.0})
    assert res["device"] == "Fake GPU 80GB" and len(res["times_ms"]) == 3
    assert res["retained_mib"] == 1 and res["steady_peak_mib"] == 4 and res["peak_mib"] == 5
    assert log.count("reset") == 2  # the high-water mark reset before the first call and after warm-up
    steps = [i for i, entry in enumerate(log) if entry == "step"]
    timed = steps[-3:]  # every timed call has the GPU waited for right before and right after it
    assert all(log[i - 1] == "sync" and log[i + 1] == "sync" for i in timed), log


def test_timing_on_cpu_reads_the_resident_set_and_never_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: pytest.fail("cuda on a cpu run"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: pytest.fail("cuda on a cpu run"))
    res = timing.timed_calls(lambda: torch.ones(2**20).sum(), {"warmup": 1, "runs": 2, "min_runs": 2, "budget_s": 0.0})
    assert res["device"] == "cpu" and res["peak_mib"] >= 0 and len(res["times_ms"]) == 2


def test_gpu_memory_cap_is_a_fraction_of_the_gpu_and_cuda_oom_is_oom(monkeypatch):
    fractions = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: argparse.Namespace(total_memory=8 * 2**30, name="Fake GPU")
    )
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f: fractions.append(f))
    devices.cap_gpu_memory(2 * 2**30)
    devices.cap_gpu_memory(64 * 2**30)
    assert fractions == [0.25, 1.0]
    assert timing.failure(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))["status"] == "OOM"
    assert timing.failure(RuntimeError("CUDA error: an illegal memory access"))["status"] == "ERROR"


def test_machine_names_the_gpu_and_the_backend_compiled_runs_on(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: argparse.Namespace(total_memory=80 * 2**30, name="Fake GPU 80GB")
    )
    info = machine.machine_info("cuda")
    assert info["device"] == "cuda" and info["gpu"] == "Fake GPU 80GB" and info["gpu_memory_gib"] == 80
    assert info["compiled_backend"] == "triton" and info["triton"]  # triton is a dev dependency
    assert machine.machine_info()["device"] == "cpu" and "gpu" not in machine.machine_info()


def test_the_report_names_the_gpu_and_the_systems_not_run():
    m = {
        "device": "cuda",
        "gpu": "Fake GPU 80GB",
        "gpu_memory_gib": 80.0,
        "cuda": "12.8",
        "triton": "3.9.0",
        "compiled_backend": "triton",
        "cpu": "Some CPU",
        "cores": 16,
        "torch_threads": 16,
        "torch": "2.13.0",
        "gnnc": "0",
        "torch_geometric": "2.8",
        "numba": None,
        "git_commit": None,
    }
    record = {
        "machine": m,
        "rates": {"copy_bytes_per_s": 3e12, "matmul_flops_per_s": 5e13},
        "rows": [],
        "preset": "quick",
        "started": "now",
        "settings": {"command": "gnnc bench --device cuda", "modes": []},
        "pairings": [],
        "not_run": {"dgl": "runs on the CPU only: why"},
    }
    text = report.markdown(record)
    assert text.startswith("# gnnc benchmark (quick, Fake GPU 80GB)")
    assert "Machine: GPU Fake GPU 80GB (80 GiB, CUDA 12.8, triton 3.9.0), `compiled` on gnnc's triton backend" in text
    assert "torch.cuda.max_memory_allocated" in text and "resident" not in text
    assert "## Systems not run (cuda)\n\n- dgl: runs on the CPU only: why" in text


def test_a_case_is_built_on_the_cpu_under_its_seed_then_moved():
    g = _case("gcn").data.graph
    data = BenchData("tiny", g, torch.randn(g.num_nodes(), 12), "test")
    case = Case.build(MODELS["gcn"], data, seed=0, device="meta")
    assert case.device == "meta" and case.data.graph.device.type == "meta" and case.data.x.is_meta
    assert all(p.is_meta for p in case.eager.parameters())
    cpu = Case.build(MODELS["gcn"], data, seed=0)
    assert cpu.data is data and torch.equal(cpu.eager.weight, Case.build(MODELS["gcn"], data, seed=0).eager.weight)


def test_a_pyg_layer_is_moved_to_the_case_device():
    pytest.importorskip("torch_geometric")
    case = dataclasses.replace(_case("gat"), device="meta")
    prepared = worker._prepare("pyg", case)
    assert all(p.is_meta for p in prepared.module.parameters())


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_a_cuda_run_times_every_system_on_the_gpu(tmp_path):
    pytest.importorskip("torch_geometric")
    settings = runner.Settings(
        models=["gat", "rgcn"],
        datasets=["pubmed", "aifb"],
        systems=["eager", "compiled", "pyg"],
        device="cuda",
        quick=True,
        warmup=1,
        runs=2,
        min_runs=2,
        budget_s=1.0,
        timeout_s=300.0,
        data_root=str(tmp_path),
        scale=0.01,
        command="test",
    )
    runner.run(settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None)
    record = json.loads((tmp_path / "results.json").read_text())["runs"][-1]
    assert record["machine"]["gpu"] == torch.cuda.get_device_name()
    assert record["machine"]["compiled_backend"] == "triton"
    for row in record["rows"]:
        assert row["status"] == "ok" and row["device"] == record["machine"]["gpu"], row
        assert row["system"] == "eager" or row["check"]["status"] == "ok", row


def test_configurations_are_spawned_when_a_fork_of_the_forkserver_cannot_use_cuda(monkeypatch):
    """What an H200 showed: every process forked from the forkserver failed CUDA's initialisation, so the
    run's first CUDA configuration probes a fork and, when it fails, spawns them all and says why."""
    probes = []

    def start(ctx, task, arg, timeout_s, mem_cap_bytes):
        probes.append((ctx.get_start_method(), task.__name__))
        return {"status": "ERROR", "error": "AcceleratorError: CUDA error: initialization error\nSearch for ..."}

    monkeypatch.setattr(runner, "_start", start)
    monkeypatch.setattr(runner, "_SPAWNED_BECAUSE", {})
    runner._context.cache_clear()
    try:
        assert runner._context("cuda").get_start_method() == "spawn"
        assert runner._context("cpu").get_start_method() == "forkserver"
        assert probes == [("forkserver", "use_cuda")]  # the CPU never probes
        method = runner.start_method("cuda")
        assert method.startswith("spawned") and method.endswith("(AcceleratorError: CUDA error: initialization error)")
        assert runner.start_method("cpu") == "forked from a forkserver holding the imports"
    finally:
        runner._context.cache_clear()
