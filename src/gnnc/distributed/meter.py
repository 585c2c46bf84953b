"""Bytes and seconds of one rank's collectives, per training step and per stage (``with
meter.stage("forward"):``; ``meter.end_step()`` closes a step; on a GPU a stage waits for its kernels before
reading the clock). What each collective counts is stated in ``gnnc.distributed.collectives``."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class StepRecord:
    """Bytes sent / received and seconds of one step, by stage."""

    sent: dict = field(default_factory=dict)
    received: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)

    def add(self, record: dict, stage: str, value: float) -> None:
        record[stage] = record.get(stage, 0) + value


class Meter:
    """Per-step, per-stage bytes and seconds of one rank.

    What is counted between two ``end_step`` calls is one step; what runs
    inside ``outside_steps`` (evaluation, reporting) goes to ``self.outside``.
    On a CUDA ``device`` a stage's time includes the kernels it queued.
    """

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.steps: list[StepRecord] = []
        self.current = StepRecord()
        self.outside = StepRecord()
        self.stage_name = "setup"
        self._in_steps = True

    @contextmanager
    def stage(self, name: str):
        """File the bytes and the wall time of the block under stage ``name``."""
        previous, self.stage_name = self.stage_name, name
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            record = self.current if self._in_steps else self.outside
            record.add(record.seconds, name, time.perf_counter() - start)
            self.stage_name = previous

    @contextmanager
    def outside_steps(self):
        """Count what runs inside this block apart from the training steps."""
        previous, self._in_steps = self._in_steps, False
        try:
            yield
        finally:
            self._in_steps = previous

    def count(self, sent: float, received: float) -> None:
        record = self.current if self._in_steps else self.outside
        record.add(record.sent, self.stage_name, sent)
        record.add(record.received, self.stage_name, received)

    def end_step(self) -> StepRecord:
        """Close the current step and return its record."""
        done, self.current = self.current, StepRecord()
        self.steps.append(done)
        return done

    def summary(self, first: int = 0) -> dict:
        """Over steps ``first``...: their number, mean bytes sent / received per step and total seconds,
        by stage."""
        steps = self.steps[first:]
        n = max(len(steps), 1)
        stages = sorted({s for r in steps for s in (*r.sent, *r.received)})
        return {
            "steps": len(steps),
            "sent_per_step": {s: sum(r.sent.get(s, 0) for r in steps) / n for s in stages},
            "received_per_step": {s: sum(r.received.get(s, 0) for r in steps) / n for s in stages},
            "seconds": {s: sum(r.seconds.get(s, 0.0) for r in steps) for s in {k for r in steps for k in r.seconds}},
        }
