"""Which path a compiled model runs, decided by measurement: its compiled plans, or the eager executor.

``measure(run, state_of, ...)`` times one step on each path, ``warmup`` untimed calls then ``calls`` timed ones
per path, interleaved (eager, compiled, eager, ...) so that a change in the machine's load falls on both, and
keeps the compiled path unless eager's median is strictly lower. The step is repeated on the same state: the
random generators, the gradients, the buffers and the train/eval flags of ``state_of`` are put back after it,
so what follows the measurement computes the numbers it would have computed without it (the step must not
change parameters itself: no optimizer step). The decision, with every timed call, is a ``PathChoice``.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from time import perf_counter

import torch
from torch import nn

PATHS = ("eager", "compiled")  # the order of the interleaved calls


@dataclass(frozen=True)
class PathChoice:
    """The path chosen and what it was chosen on: ``what`` one timed call ran, its seconds per path."""

    path: str
    what: str
    warmup: int
    eager_s: tuple[float, ...]
    compiled_s: tuple[float, ...]

    @property
    def eager_median(self) -> float:
        return statistics.median(self.eager_s)

    @property
    def compiled_median(self) -> float:
        return statistics.median(self.compiled_s)

    def __str__(self) -> str:
        return (
            f"{self.path} ({self.what}, median of {len(self.eager_s)} after {self.warmup} warm-up: "
            f"compiled {self.compiled_median * 1e3:.1f} ms, eager {self.eager_median * 1e3:.1f} ms)"
        )


def _synchronized() -> None:
    """Wait for queued GPU work, so that a call's time includes it."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@contextlib.contextmanager
def restored(model: nn.Module) -> Iterator[None]:
    """Inside, anything may run ``model``: after, torch's random generators, its gradients, buffers and
    train/eval flags are as before."""
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    grads = [(p, None if p.grad is None else p.grad.clone()) for p in model.parameters()]
    buffers = [(b, b.clone()) for b in model.buffers()]
    flags = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        for p, grad in grads:
            p.grad = grad
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for m, training in flags:
            m.train(training)


def measure(
    run: Callable[[str], object],
    state_of: nn.Module,
    *,
    what: str,
    warmup: int = 2,
    calls: int = 5,
    clock: Callable[[], float] | None = None,
) -> PathChoice:
    """Time ``run(path)`` for each path in ``PATHS`` (see the module); ``clock`` defaults to
    ``time.perf_counter``. ValueError for fewer than one timed call or a negative warm-up."""
    if calls < 1 or warmup < 0:
        raise ValueError(f"measure takes calls >= 1 and warmup >= 0, not calls={calls}, warmup={warmup}")
    clock = clock or perf_counter
    seconds: dict[str, list[float]] = {path: [] for path in PATHS}
    for i in range(warmup + calls):
        for path in PATHS:
            with restored(state_of):
                _synchronized()
                start = clock()
                run(path)
                _synchronized()
                if i >= warmup:
                    seconds[path].append(clock() - start)
    eager, compiled = statistics.median(seconds["eager"]), statistics.median(seconds["compiled"])
    return PathChoice(
        "eager" if eager < compiled else "compiled",
        what,
        warmup,
        tuple(seconds["eager"]),
        tuple(seconds["compiled"]),
    )


__all__ = ["PATHS", "PathChoice", "measure", "restored"]
