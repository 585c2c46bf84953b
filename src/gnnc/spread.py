"""Timings with their spread, and a warning when the machine is too busy for them to mean much."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

import torch

from . import progress


@dataclass(frozen=True)
class Spread:
    """Median and interquartile range of some timings, in ms."""

    median: float
    q1: float
    q3: float

    def __str__(self) -> str:
        return f"{self.median:.1f} ({self.q1:.1f}-{self.q3:.1f})"


def measure(fn, runs: int, desc: str) -> Spread:
    """``fn()`` once to warm up (caches, compiled plans), then ``runs`` timed calls."""
    fn()
    times = []
    for _ in progress.bar(range(runs), desc=desc, leave=False, delay=2):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    if len(times) == 1:
        return Spread(times[0], times[0], times[0])
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return Spread(median, q1, q3)


def busy_warning(threads: int | None = None) -> str | None:
    """A warning when the 1-minute load average, less one process (this one), plus the ``threads`` (default
    torch's) the timing runs on exceeds the cores: the timings then measure other work too. None when the
    machine has room, or cannot say."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cores = os.cpu_count() or 1
    threads = torch.get_num_threads() if threads is None else threads
    if load - 1 + threads <= cores:
        return None
    return (
        f"warning: load average {load:.1f} on {cores} cores, and these timings use {threads} torch thread(s): "
        f"other work shares the cores, so the times are slower and noisier than on an idle machine"
    )
