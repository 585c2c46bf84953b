"""``gnnc train --dist`` as a multi-node job on emulated machines (``emulated_machines``).

``start_job`` runs the same ``gnnc train --dist`` command on every machine,
one torchrun each (``--nnodes M --node-rank i --rdzv-endpoint`` at machine
0's address), with gloo bound to the machine's link (GLOO_SOCKET_IFNAME);
machine ``i`` runs ranks ``i * nproc`` to ``(i + 1) * nproc - 1``.
Each torchrun's stdout and stderr go to ``m{i}.out`` / ``m{i}.err`` in the
job's log folder. ``wait_job`` waits for every torchrun, with a deadline.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

RDZV_PORT = 29400


@dataclass
class Job:
    """The torchrun of each machine, its log files, and when each ended (``time.monotonic``)."""

    procs: list
    logs: Path
    ended: dict = field(default_factory=dict)

    def stderr(self, machine: int) -> str:
        return (self.logs / f"m{machine}.err").read_text()

    def stdout(self, machine: int) -> str:
        return (self.logs / f"m{machine}.out").read_text()


def train_command(cluster, machine: int, nproc: int, options: list) -> list:
    """``gnnc train --dist OPTIONS`` for machine ``machine`` of ``cluster``, ``nproc`` workers there."""
    return [
        sys.executable,
        "-m",
        "gnnc.cli",
        "train",
        "--dist",
        *map(str, options),
        "--nproc",
        str(nproc),
        "--nnodes",
        str(cluster.count),
        "--node-rank",
        str(machine),
        "--rdzv-endpoint",
        f"{cluster.address(0)}:{RDZV_PORT}",
    ]


def job_env() -> dict:
    """The workers' environment: gloo on the machine's link, one thread per worker."""
    return dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def start_job(cluster, nproc: int, options: list, logs) -> Job:
    """Start ``gnnc train --dist OPTIONS`` on every machine of ``cluster``; logs go to folder ``logs``."""
    logs = Path(logs)
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for i in range(cluster.count):
        with open(logs / f"m{i}.out", "w") as out, open(logs / f"m{i}.err", "w") as err:
            procs.append(
                cluster.popen(i, train_command(cluster, i, nproc, options), env=job_env(), stdout=out, stderr=err)
            )
    return Job(procs, logs)


def wait_job(job: Job, timeout_s: float) -> list:
    """Every torchrun's exit status once all ended; TimeoutError naming the machines still running after
    ``timeout_s`` seconds (their processes are left to the cluster's clean-up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for i, proc in enumerate(job.procs):
            if i not in job.ended and proc.poll() is not None:
                job.ended[i] = time.monotonic()
        if len(job.ended) == len(job.procs):
            return [proc.returncode for proc in job.procs]
        if time.monotonic() > deadline:
            running = [i for i in range(len(job.procs)) if i not in job.ended]
            raise TimeoutError(f"machines {running} still run the job after {timeout_s:g} s")
        time.sleep(0.05)
