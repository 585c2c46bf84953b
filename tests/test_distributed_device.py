"""``gnnc train --dist --device cuda``: which device and backend a worker picks, the usage errors that stop a
run before any process starts, checkpoint state on the CPU; on GPUs, RAF and vanilla runs end to end whose
losses equal the CPU run's and whose checkpoints load on the CPU."""

import json
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch

from gnnc import cli
from gnnc.distributed import add_reverse_relations, launch, meta_partition, process_group, save_partitions
from gnnc.distributed.devices import backend_for, collective_device, worker_device
from gnnc.distributed.launch import prepare_partitions, worker_parser
from gnnc.distributed.process_group import init_from_env
from gnnc.distributed.trainer import on_cpu

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


# ------------------------------------------------------------ device choice
def test_a_cuda_worker_takes_the_gpu_of_its_local_rank_and_nccl():
    for local_rank, gpus in ((0, 1), (1, 2), (3, 4)):
        device = worker_device("cuda", local_rank, gpus)
        assert device == torch.device("cuda", local_rank) and backend_for(device) == "nccl"
    cpu = worker_device("cpu", 3, 0)
    assert cpu == torch.device("cpu") and backend_for(cpu) == "gloo"


def test_a_worker_without_a_gpu_of_its_own_or_on_another_device_type_fails_naming_it():
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK 2 needs GPU cuda:2, but this machine has 2 CUDA device"):
        worker_device("cuda", 2, 2)
    with pytest.raises(RuntimeError, match="has 0 CUDA device"):
        worker_device("cuda", 0, 0)
    with pytest.raises(ValueError, match="'cpu' or 'cuda', not 'mps'"):
        worker_device("mps", 0, 1)


@pytest.mark.parametrize("device,local_rank,want", [("cuda", "1", ("nccl", "cuda:1")), ("cpu", "1", ("gloo", None))])
def test_init_from_env_joins_on_the_workers_device(monkeypatch, device, local_rank, want):
    """LOCAL_RANK and the device pick the GPU made current, the backend and the group's bound device."""
    calls = {}
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    for key, value in dict(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.setdefault("current", str(d)))
    monkeypatch.setattr(
        process_group.dist,
        "init_process_group",
        lambda backend, timeout, device_id: calls.update(backend=backend, bound=device_id),
    )
    monkeypatch.setattr(process_group.dist.distributed_c10d, "_set_pg_timeout", lambda timeout: None)
    monkeypatch.setattr(process_group, "Comm", lambda timeout_s: "joined")
    assert init_from_env(60, device=device) == "joined"
    backend, gpu = want
    assert calls["backend"] == backend and calls.get("current") == gpu
    assert calls["bound"] == (None if gpu is None else torch.device(gpu))


def test_collectives_take_tensors_on_the_current_gpu_under_nccl(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert collective_device("nccl") == torch.device("cuda", 1)
    assert collective_device("gloo") == torch.device("cpu")


# --------------------------------------------------------- the command line
@pytest.fixture
def launched(monkeypatch):
    """Replaces ``launch.run_cli`` (which partitions and starts torchrun): records the arguments it gets."""
    seen = []
    monkeypatch.setattr(launch, "run_cli", lambda args: seen.append(args) or 0)
    return seen


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err


def test_dist_on_cuda_without_cuda_stops_before_any_process(monkeypatch, capsys, launched):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["train", "--dist", "--device", "cuda"]) == 2
    assert _error_line(capsys).startswith(
        "gnnc train: error: --device cuda needs an NVIDIA GPU, but torch.cuda.is_available() is False here"
    )
    assert launched == []


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--device", "cuda:1"],
            "--dist takes --device cpu or cuda (each worker then uses GPU LOCAL_RANK), not 'cuda:1'",
        ),
        (["--device", "cuda", "--nproc", "3"], "--nproc 3 exceeds the 2 GPU(s) here; lower --nproc"),
    ],
)
def test_dist_devices_the_workers_cannot_have_are_usage_errors(monkeypatch, capsys, launched, argv, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert cli.main(["train", "--dist", *argv]) == 2
    assert message in _error_line(capsys)
    assert launched == []


@pytest.fixture(scope="module")
def meta2(dataset, tmp_path_factory):
    path = tmp_path_factory.mktemp("parts") / "meta2"
    save_partitions(meta_partition(add_reverse_relations(dataset.graph), "paper", 2, 2), path)
    return path


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_device_reaches_every_workers_command_line(monkeypatch, meta2, device):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    started = []
    monkeypatch.setattr(launch.subprocess, "call", lambda cmd: started.append(cmd) or 0)
    assert cli.main(["train", "--dist", "--partitions", str(meta2), "--fanouts", "3", "3", "--device", device]) == 0
    (cmd,) = started
    worker = cmd[cmd.index(launch.WORKER_MODULE) + 1 :]
    assert worker_parser().parse_args(worker).device == device


# ------------------------------------------------------- checkpoint state
def test_checkpoint_state_keeps_cpu_tensors_and_state_dict_metadata():
    module = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LayerNorm(3))
    state = {"model": module.state_dict(), "steps": [torch.ones(2), (torch.zeros(1), 3)], "epoch": 2}
    moved = on_cpu(state)
    assert isinstance(moved["model"], OrderedDict) and moved["model"]._metadata == state["model"]._metadata
    assert moved["model"]["0.weight"] is state["model"]["0.weight"]  # CPU tensors are not copied
    assert isinstance(moved["steps"][1], tuple) and moved["steps"][1][1] == 3 and moved["epoch"] == 2
    torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LayerNorm(3)).load_state_dict(moved["model"])


# ========================================================== on GPUs
# float32 on the GPU vs the CPU. Measured on the CPU: perturbing the weights by 1e-6 (relative) after every
# step moves these losses by < 2e-7; leaving out the gradient sum over ranks, by 4e-4 to 8e-2.
LOSS_TOL = dict(rel=1e-4)
COMMON = [
    "--dataset",
    "mag",
    "--model",
    "rgcn",
    "--fanouts",
    "3",
    "3",
    "--batch-size",
    "128",
    "--hidden",
    "8",
    "--lr",
    "0.02",
    "--dist-timeout",
    "120",
]
DEADLINE_S = 300


def _gnnc_train(mode: str, parts, nproc: int, device: str, epochs: int, *extra) -> str:
    """stdout of ``gnnc train --dist`` with these settings, which must succeed."""
    argv = [
        sys.executable,
        "-m",
        "gnnc.cli",
        "train",
        "--dist",
        "--mode",
        mode,
        "--nproc",
        str(nproc),
        "--partitions",
        str(parts),
        "--device",
        device,
        "--epochs",
        str(epochs),
        *COMMON,
        *map(str, extra),
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=DEADLINE_S, env=dict(os.environ, OMP_NUM_THREADS="1")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _losses(report) -> list:
    return [step for epoch in json.loads(report.read_text())["epochs"] for step in epoch["losses"]]


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors(value)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 1, reason="needs a CUDA GPU")
@pytest.mark.parametrize(
    "nproc",
    [
        pytest.param(1),
        pytest.param(
            2,
            marks=pytest.mark.skipif(GPUS < 2, reason="two workers need two GPUs (NCCL refuses two ranks on one GPU)"),
        ),
    ],
)
@pytest.mark.parametrize("mode", ["raf", "vanilla"])
def test_cuda_run_resumed_with_the_cache_has_the_cpu_runs_losses(tmp_path, mode, nproc):
    """Two epochs on the CPU; on the GPUs one epoch with a checkpoint, then a resume with the feature cache.
    The GPU run's losses are the CPU run's; its checkpoint holds CPU tensors only."""
    parts = tmp_path / "parts"
    prepare_partitions("mag", 0.001, 0, "meta" if mode == "raf" else "metis", nproc, 2, parts)
    cpu, gpu, checkpoint = tmp_path / "cpu.json", tmp_path / "gpu.json", tmp_path / "checkpoint"
    _gnnc_train(mode, parts, nproc, "cpu", 2, "--report", cpu)
    _gnnc_train(mode, parts, nproc, "cuda", 1, "--checkpoint", checkpoint)
    out = _gnnc_train(
        mode, parts, nproc, "cuda", 2, "--checkpoint", checkpoint, "--resume", "--cache-fraction", 0.25, "--report", gpu
    )
    assert "resumed from" in out and "all ranks: cache hit" in out
    assert json.loads(gpu.read_text())["device"] == "cuda"
    want = _losses(cpu)
    assert len(want) > 2 and _losses(gpu) == pytest.approx(want, **LOSS_TOL)
    files = sorted(p for p in checkpoint.iterdir() if p.suffix == ".pt")
    assert len(files) == 2 * (nproc + 1)  # epochs 1 and 2: a checkpoint keeps the generation before the last
    for path in files:
        devices = {t.device.type for t in _tensors(torch.load(path, weights_only=True))}
        assert devices == {"cpu"}, path.name
