"""``gnnc train --dist`` across emulated machines (network namespaces, shaped veth links; root only).

Two machines of two workers each (RAF, mag replica at scale 0.001, four
meta partitions, links of 1 Gbit/s). One module fixture runs, in order:

* ``straight``: four epochs without fault (the reference);
* ``killed``: the same with a checkpoint; once epoch 1 is committed,
  machine 1 is killed (all its processes SIGKILLed);
* ``cut``: ``--resume``; once epoch 2 is committed, machine 1's link goes down;
* ``slow``: ``--resume``; once epoch 3 is committed, machine 1's link drops
  to 8 kbit/s;
* ``resumed``: ``--resume`` to the end.

Collectives time out after ``TIMEOUT_S`` (8 s); every surviving torchrun must
end within ``TIMEOUT_S + GRACE_S`` (20 s) of the fault (measured: 1.2 s after
the kill, 9.7 s after the cut and the slow-down) with an error naming a rank and
its machine, and the checkpoint must still be the one before the fault (the
fault hit mid-epoch). The epochs of the chained runs, read from each
checkpoint and the last report, equal the reference's losses exactly.
"""

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import emulated_machines
from emulated_jobs import start_job, wait_job
from gnnc.distributed import add_reverse_relations, meta_partition, save_partitions
from gnnc.distributed.checkpoint import read_manifest

pytestmark = pytest.mark.skipif(
    emulated_machines.unavailable() is not None, reason=str(emulated_machines.unavailable())
)

MACHINES, NPROC, EPOCHS = 2, 2, 4
TIMEOUT_S, GRACE_S = 8, 12
RUN_DEADLINE_S = 180


def options(parts, epochs, checkpoint=None, resume=False, report=None):
    out = [
        "--dataset",
        "mag",
        "--model",
        "rgcn",
        "--partitions",
        parts,
        "--fanouts",
        3,
        3,
        "--batch-size",
        16,
        "--hidden",
        8,
        "--epochs",
        epochs,
        "--lr",
        0.02,
        "--dist-timeout",
        TIMEOUT_S,
    ]
    if checkpoint:
        out += ["--checkpoint", checkpoint]
    if resume:
        out.append("--resume")
    if report:
        out += ["--report", report]
    return out


def _wait_for_epoch(checkpoint: Path, epoch: int, job, deadline_s: float = RUN_DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            if read_manifest(checkpoint)["epoch"] >= epoch:
                return
        except (FileNotFoundError, ValueError):
            pass
        if any(p.poll() is not None for p in job.procs):
            pytest.fail(f"the job ended before epoch {epoch} was committed:\n{job.stderr(0)[-3000:]}")
        time.sleep(0.02)
    pytest.fail(f"epoch {epoch} was not committed within {deadline_s} s")


@pytest.fixture(scope="module")
def runs(dataset, tmp_path_factory):
    """{name: {"status": [per machine], "after_fault_s": {machine: s}, "job": Job, "epoch": committed}}."""
    root = tmp_path_factory.mktemp("emulated")
    parts = root / "parts"
    save_partitions(meta_partition(add_reverse_relations(dataset.graph), "paper", MACHINES * NPROC, 2), parts)
    checkpoint = root / "checkpoint"
    out = {}
    with emulated_machines.EmulatedMachines(MACHINES, rate="1gbit") as cluster:
        job = start_job(cluster, NPROC, options(parts, EPOCHS, report=root / "straight.json"), root / "straight")
        out["straight"] = {
            "status": wait_job(job, RUN_DEADLINE_S),
            "job": job,
            "report": json.loads((root / "straight.json").read_text()),
        }
        faults = [
            ("killed", 1, False, lambda: cluster.kill_machine(1)),
            ("cut", 2, True, lambda: cluster.cut_link(1)),
            ("slow", 3, True, lambda: cluster.shape_link(1, "8kbit")),
        ]
        for name, epoch, resume, fault in faults:
            job = start_job(cluster, NPROC, options(parts, EPOCHS, checkpoint, resume), root / name)
            _wait_for_epoch(checkpoint, epoch, job)
            fault()
            at = time.monotonic()
            survivors = [0] if name == "killed" else [0, 1]
            try:
                status = wait_job(job, TIMEOUT_S + GRACE_S)
            except TimeoutError as err:
                pytest.fail(f"{name}: {err}")
            out[name] = {
                "status": status,
                "job": job,
                "epoch": read_manifest(checkpoint)["epoch"],
                "after_fault_s": {i: job.ended[i] - at for i in survivors},
                "records": _checkpoint_records(checkpoint),
            }
            cluster.restore_link(1)
        job = start_job(
            cluster, NPROC, options(parts, EPOCHS, checkpoint, True, root / "resumed.json"), root / "resumed"
        )
        out["resumed"] = {
            "status": wait_job(job, RUN_DEADLINE_S),
            "job": job,
            "report": json.loads((root / "resumed.json").read_text()),
        }
    return out


def _checkpoint_records(checkpoint: Path) -> list:
    import torch

    manifest = read_manifest(checkpoint)
    return torch.load(checkpoint / manifest["dense"], weights_only=False)["extra"]["records"]


def losses(records) -> list:
    return [loss for record in records for loss in record["losses"]]


def test_multi_node_job_trains_on_two_machines(runs):
    straight = runs["straight"]
    assert straight["status"] == [0, 0], straight["job"].stderr(0)[-3000:]
    report = straight["report"]
    assert report["world"] == MACHINES * NPROC and len(report["epochs"]) == EPOCHS
    assert report["epochs"][-1]["loss"] < report["epochs"][0]["loss"]
    for rank in report["epochs"][0]["ranks"]:
        assert rank["sent_per_step"]["forward"] > 0  # every rank took part, over the links


@pytest.mark.parametrize("fault,epoch", [("killed", 1), ("cut", 2), ("slow", 3)])
def test_a_fault_ends_every_surviving_process_naming_rank_and_machine(runs, fault, epoch):
    run = runs[fault]
    assert run["epoch"] == epoch, "the fault did not hit the epoch after the checkpoint"
    for machine, seconds in run["after_fault_s"].items():
        assert run["status"][machine] != 0
        assert seconds < TIMEOUT_S + GRACE_S
        err = run["job"].stderr(machine)
        assert f"on gnnc-m{machine} (node {machine}): PeerFailure: rank " in err, err[-3000:]
        assert "a peer process died or did not answer within 8 s" in err
    assert losses(run["records"]) == losses(runs["straight"]["report"]["epochs"][:epoch])


def test_resume_after_the_faults_repeats_the_uninterrupted_losses(runs):
    resumed = runs["resumed"]
    assert resumed["status"] == [0, 0], resumed["job"].stderr(0)[-3000:]
    assert [r["epoch"] for r in resumed["report"]["epochs"]] == list(range(1, EPOCHS + 1))
    assert losses(resumed["report"]["epochs"]) == losses(runs["straight"]["report"]["epochs"])
