"""Shared pieces of the multi-process tests: a free localhost port, a bounded process group (their
dataset is conftest's ``dataset`` fixture)."""

from __future__ import annotations

import socket
import time

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_group(worker, world: int, args: tuple, deadline_s: float, what: str) -> None:
    """Run ``worker(rank, *args)`` in ``world`` spawned processes; fail the test (killing them) after
    ``deadline_s`` seconds, naming ``what``."""
    import torch.multiprocessing as mp

    ctx = mp.start_processes(worker, args=args, nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + deadline_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{what} did not finish within {deadline_s} s")
