"""Wall time per stage of compiling and running, recorded only inside ``recording()``.

``timed(name)`` marks a stage: ``failures.stage`` times every stage it names (tracing, each pass, lowering,
code generation, the cost model, a plan's binding and run), structure builders time themselves as graph
preparation, and numba kernels as compiled or loaded from numba's disk cache. Inside ``recording()`` each
stage's *own* time is summed by name: its wall time less that of the stages timed inside it, so the stages
add up to the time spent in any of them, and the rest of the block's wall time ran outside every stage
(eager torch operators, autograd, the caller's Python). Outside ``recording()`` a stage costs one context
variable read. Stages are timed on the thread that opened ``recording()`` only.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

OUTSIDE = "outside any stage"  # the name ``StageTimes.table`` gives the block's time in no stage


@dataclass
class Frame:
    """A stage being timed: its name (which its caller may change before it ends) and its children's time."""

    name: str
    start: float
    inner: float = 0.0


@dataclass
class StageTimes:
    """Own seconds and entries per stage name, and the wall time of the recorded block."""

    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    _stack: list[Frame] = field(default_factory=list)

    def enter(self, name: str) -> Frame:
        frame = Frame(name, time.perf_counter())
        self._stack.append(frame)
        return frame

    def leave(self, frame: Frame) -> None:
        elapsed = time.perf_counter() - frame.start
        while self._stack and self._stack.pop() is not frame:  # a stage left open inside this one
            pass
        self.seconds[frame.name] = self.seconds.get(frame.name, 0.0) + elapsed - frame.inner
        self.counts[frame.name] = self.counts.get(frame.name, 0) + 1
        if self._stack:
            self._stack[-1].inner += elapsed

    def table(self) -> dict[str, float]:
        """Own seconds per stage, largest first, then ``OUTSIDE``: the values sum to ``wall``."""
        ranked = dict(sorted(self.seconds.items(), key=lambda item: -item[1]))
        ranked[OUTSIDE] = self.wall - sum(self.seconds.values())
        return ranked


def side_by_side(columns: dict[str, StageTimes], most: int = 16) -> str:
    """A text table of own seconds per stage, one column per recorded block (``columns``: title -> times):
    the ``most`` largest stages of the first column, the other stages summed, the time outside any stage,
    and the wall time, which the rows above it add up to."""
    tables = [times.table() for times in columns.values()]
    named = [n for n in tables[0] if n != OUTSIDE][:most]
    width = max(12, *(len(title) for title in columns))
    label = max(len(OUTSIDE), *(len(n) for n in named))

    def row(name: str, values: list[float]) -> str:
        return f"{name:<{label}}" + "".join(f"  {v:>{width}.3f}" for v in values)

    lines = [f"{'stage (own seconds)':<{label}}" + "".join(f"  {title:>{width}}" for title in columns)]
    lines += [row(n, [t.get(n, 0.0) for t in tables]) for n in named]
    others = [sum(v for n, v in t.items() if n not in named and n != OUTSIDE) for t in tables]
    lines += [row("(other stages)", others), row(OUTSIDE, [t[OUTSIDE] for t in tables])]
    lines.append(row("wall", [times.wall for times in columns.values()]))
    return "\n".join(lines)


_RECORDER: contextvars.ContextVar[StageTimes | None] = contextvars.ContextVar("gnnc_stage_times", default=None)


@contextlib.contextmanager
def recording() -> Iterator[StageTimes]:
    """Record the stages run inside the block; the yielded ``StageTimes`` is complete after it."""
    times = StageTimes()
    token = _RECORDER.set(times)
    start = time.perf_counter()
    try:
        yield times
    finally:
        times.wall = time.perf_counter() - start
        _RECORDER.reset(token)


@contextlib.contextmanager
def timed(name: str) -> Iterator[Frame | None]:
    """Time the block as stage ``name`` while recording; yields its ``Frame`` (None when not recording)."""
    times = _RECORDER.get()
    if times is None:
        yield None
        return
    frame = times.enter(name)
    try:
        yield frame
    finally:
        times.leave(frame)


__all__ = ["OUTSIDE", "StageTimes", "recording", "side_by_side", "timed"]
