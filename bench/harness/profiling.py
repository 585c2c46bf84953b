"""``--profile``: torch.profiler over a few calls of a timed configuration, and the text files it goes to.

A profile runs in a subprocess of its own after the configuration's timed
one (its warm-up calls, then the profiled calls), so it never touches the
reported times and a failing profile costs only itself. Operators are
ranked by self CPU time per call. What the profiler records no operator
for (Python between operators, dispatch, a numba kernel called outside any
autograd Function) is the wall time per call minus the operators' self
time, listed as its own line, so a table adds up to its wall time.

Files: ``<folder>/<model>-<dataset>-<mode>.txt``, one section per system
in run order, so the systems of one table row can be read side by side.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

DEFAULT_CALLS = 3
DEFAULT_ROWS = 15


def profile_calls(step, calls: int = DEFAULT_CALLS, rows: int = DEFAULT_ROWS) -> dict:
    """Run ``step`` ``calls`` times under torch.profiler (CPU).

    Returns ``{"calls", "wall_ms", "operator_ms", "operators": [[name, self ms, count], ...]}``, per
    call: wall time, self CPU time of all operators, and the ``rows`` operators of highest self time.
    """
    if calls < 1:
        raise ValueError(f"profile calls must be at least 1, got {calls}")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(calls):
            step()
        wall = time.perf_counter() - start
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return {
        "calls": calls,
        "wall_ms": 1e3 * wall / calls,
        "operator_ms": sum(e.self_cpu_time_total for e in ops) / 1e3 / calls,
        "operators": [[e.key, e.self_cpu_time_total / 1e3 / calls, e.count / calls] for e in ops[:rows]],
    }


def _ms(x: float) -> str:
    """Three significant digits, no exponent (as the report's tables)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def format_section(system: str, time_ms: float, profile: dict) -> str:
    """One system's table: header with timed median and profiled wall time, then operators per call.

    ``profile`` is ``profile_calls``'s dict with ``"status": "ok"``, or a failed subprocess's
    ``{"status", "error"}``, which the section states instead of a table.
    """
    if profile["status"] != "ok":
        return (
            f"== {system}: median {_ms(time_ms)} ms timed; no profile: {profile['status']}: {profile.get('error', '')}"
        )
    wall, total = profile["wall_ms"], profile["operator_ms"]
    lines = [
        f"== {system}: median {_ms(time_ms)} ms timed; {profile['calls']} profiled calls, "
        f"{_ms(wall)} ms per call under the profiler"
    ]
    if profile.get("fixed_mmap"):
        lines.append(
            "   (profiled with every allocation over 128 KiB mmapped, after the default allocator's "
            "profile ran out of memory: memory-touching operators cost more than when timed)"
        )
    lines.append(f"{'self ms/call':>12}  {'share':>6}  {'calls/call':>10}  operator")
    for name, self_ms, count in profile["operators"]:
        lines.append(f"{self_ms:12.3f}  {self_ms / wall:6.1%}  {count:10.1f}  {name}")
    outside = wall - total
    lines.append(
        f"{outside:12.3f}  {outside / wall:6.1%}  {'':>10}  (outside any recorded operator: Python, "
        f"dispatch, kernels called outside one)"
    )
    lines.append(f"{total:12.3f}  {total / wall:6.1%}  {'':>10}  (all operators, self time)")
    return "\n".join(lines)


class ProfileFiles:
    """Collects profile sections and (re)writes ``<folder>/<model>-<dataset>-<mode>.txt`` as they arrive."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.sections: dict[tuple[str, str, str], list[str]] = {}

    def path(self, model: str, dataset: str, mode: str) -> Path:
        return self.folder / f"{model}-{dataset}-{mode}.txt"

    def add(self, row: dict, profile: dict) -> Path:
        """Add ``row``'s system (with its timed median) to its file; returns the file."""
        key = (row["model"], row["dataset"], row["mode"])
        self.sections.setdefault(key, []).append(format_section(row["system"], row["time_ms"], profile))
        path = self.path(*key)
        self.folder.mkdir(parents=True, exist_ok=True)
        title = f"# {key[0]} on {key[1]}, {key[2]}: top operators by self CPU time per call (torch.profiler)"
        path.write_text("\n\n".join([title, *self.sections[key]]) + "\n")
        return path
