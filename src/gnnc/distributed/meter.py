"""Bytes, rounds and seconds of one rank's collectives, per training step and per stage (``with
meter.stage("forward"):``; ``meter.end_step()`` closes a step; on a GPU a stage waits for its kernels before
reading the clock). A round is one message latency a collective waits for in sequence (a ring all-reduce
over p ranks: 2 (p - 1)). What each collective counts is stated in ``gnnc.distributed.collectives``.

A stage's CPU seconds (``time.process_time``: every thread of the process, user and system) are kept
beside its wall seconds: on a shared machine they are what the stage costs a core of its own, as a
process waiting for a core, or for a peer in a collective, is not charged for the wait."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class StepRecord:
    """Bytes sent / received, rounds, wall and CPU seconds of one step, by stage."""

    sent: dict = field(default_factory=dict)
    received: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    rounds: dict = field(default_factory=dict)
    cpu_seconds: dict = field(default_factory=dict)

    def add(self, record: dict, stage: str, value: float) -> None:
        record[stage] = record.get(stage, 0) + value


class Meter:
    """Per-step, per-stage bytes, rounds and seconds of one rank.

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
        """File the bytes, the wall and the CPU time of the block under stage ``name``."""
        previous, self.stage_name = self.stage_name, name
        start, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            record = self.current if self._in_steps else self.outside
            record.add(record.seconds, name, time.perf_counter() - start)
            record.add(record.cpu_seconds, name, time.process_time() - cpu)
            self.stage_name = previous

    @contextmanager
    def outside_steps(self):
        """Count what runs inside this block apart from the training steps."""
        previous, self._in_steps = self._in_steps, False
        try:
            yield
        finally:
            self._in_steps = previous

    def count(self, sent: float, received: float, rounds: int) -> None:
        """File one collective: the bytes this rank sent and received, and its rounds (module docstring)."""
        record = self.current if self._in_steps else self.outside
        record.add(record.sent, self.stage_name, sent)
        record.add(record.received, self.stage_name, received)
        record.add(record.rounds, self.stage_name, rounds)

    def end_step(self) -> StepRecord:
        """Close the current step and return its record."""
        done, self.current = self.current, StepRecord()
        self.steps.append(done)
        return done

    def summary(self, first: int = 0) -> dict:
        """Over steps ``first``...: their number, mean bytes sent / received and rounds per step, and total
        wall and CPU seconds, by stage."""
        steps = self.steps[first:]
        n = max(len(steps), 1)
        stages = sorted({s for r in steps for s in (*r.sent, *r.received)})
        return {
            "steps": len(steps),
            "sent_per_step": {s: sum(r.sent.get(s, 0) for r in steps) / n for s in stages},
            "received_per_step": {s: sum(r.received.get(s, 0) for r in steps) / n for s in stages},
            "rounds_per_step": {s: sum(r.rounds.get(s, 0) for r in steps) / n for s in stages},
            "seconds": {s: sum(r.seconds.get(s, 0.0) for r in steps) for s in {k for r in steps for k in r.seconds}},
            "cpu_seconds": {
                s: sum(r.cpu_seconds.get(s, 0.0) for r in steps) for s in {k for r in steps for k in r.cpu_seconds}
            },
        }
