"""The timed region of one configuration: the step, its timed calls and their memory, and failures.

Clock and memory are the configuration's device's (``devices.meter``:
resident set on CPU, torch's CUDA allocator on a GPU, whose work is waited
for before every reading of the clock). Imports torch and the harness's
stdlib-only modules but not gnnc, so the peer interpreter (``peer_worker``,
DGL on its own torch) times its systems with exactly the code the harness's
own configurations use.
"""

from __future__ import annotations

import statistics
import time
import traceback
from pathlib import Path

import torch

from . import devices

MODES = ("inference", "training")
SGD_LR = 1e-3


def failure(exc: BaseException, context: str = "") -> dict:
    """``{"status": "OOM" | "ERROR", "error": ...}`` for ``exc``, naming where it was raised."""
    status = "OOM" if devices.is_out_of_memory(exc) else "ERROR"
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
    return {"status": status, "error": f"{context}{type(exc).__name__}: {exc}"[:400] + at}


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for item in out if item is not None for t in _tensors(item)]


def make_step(prepared, x: torch.Tensor, mode: str):
    """One inference forward (no autograd), or one training step: forward, sum loss, backward, SGD update."""
    if mode == "inference":
        prepared.module.eval()

        def step():
            with torch.no_grad():
                prepared.call(x)

        return step
    if mode != "training":
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    prepared.module.train()
    opt = torch.optim.SGD(prepared.module.parameters(), lr=SGD_LR)

    def step():
        opt.zero_grad(set_to_none=True)
        sum(t.sum() for t in _tensors(prepared.call(x))).backward()
        opt.step()

    return step


def measure(step, warmup: int, runs: int, min_runs: int, budget_s: float, clock=time.perf_counter) -> list[float]:
    """Seconds of each timed call after ``warmup`` untimed ones, read on ``clock``; stops after ``min_runs``
    once ``budget_s`` of timed calls have passed, else after ``runs``."""
    for _ in range(warmup):
        step()
    times = []
    while len(times) < runs and (len(times) < min_runs or sum(times) < budget_s):
        start = clock()
        step()
        times.append(clock() - start)
    return times


def settle() -> int:
    """On the CPU: collect garbage, return freed heap to the OS, reset the high-water mark; the resident set
    (KiB). (``bench/natural_udfs.py`` times with it.)"""
    return devices.CpuMeter().settle()


def timed_calls(step, cfg: dict) -> dict:
    """Warm-up, then the timed calls of ``step`` with their memory (see ``worker.time_config``), on the
    meter of ``cfg["device"]`` (default cpu); ``device`` in the result names it (the GPU's name on cuda).

    ``first_call_ms`` is the first warm-up call alone: for a system that
    compiles on its first call (``pyg-compile``) that is where the compile
    time goes, never into ``time_ms``.
    """
    meter = devices.meter(cfg.get("device", "cpu"))
    libraries_mapped = meter.prepare()
    before = meter.settle()
    first_ms = None
    for _ in range(max(1, cfg["warmup"])):  # the first call builds plans and caches, loads kernels
        start = meter.now()
        step()
        if first_ms is None:
            first_ms = 1e3 * (meter.now() - start)
    warm_peak_kib = meter.peak() - before
    settled = meter.settle()
    # the warm-up again, untimed: settle returned the freed heap to the OS, and timing the calls that
    # fault it back in would measure the harness, not the system's steady state
    times = measure(step, cfg["warmup"], cfg["runs"], cfg["min_runs"], cfg["budget_s"], meter.now)
    steady_kib = meter.peak() - settled
    retained_kib = settled - before
    return {
        "status": "ok",
        "time_ms": 1e3 * statistics.median(times),
        "times_ms": [1e3 * t for t in times],
        "first_call_ms": first_ms,
        "peak_mib": max(warm_peak_kib, retained_kib + steady_kib) / 1024,
        "steady_peak_mib": steady_kib / 1024,
        "retained_mib": retained_kib / 1024,
        "libraries_mapped": libraries_mapped,
        "threads": torch.get_num_threads(),
        "device": meter.name(),
    }
