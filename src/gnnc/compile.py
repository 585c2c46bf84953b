"""``gnnc.compile``: run a model's message passing through the MP-DFG compiler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from . import backend as backends
from .compiler.driver import recording
from .compiler.passes import pass_names
from .forward.capture import Forwards
from .forward.passes import FORWARD_PASSES
from .ir.printer import cost_choices, estimate, format_dfg, to_dot
from .message_passing import compiling
from .path_choice import PATHS, PathChoice, measure


class CompiledModule(nn.Module):
    """Wraps a model; every update_all / apply_edges / multi_update_all inside runs compiled, and the
    forward itself is captured where a forward pass rewrites it (``gnnc.forward.capture``).

    Parameters are the model's own (``compiled.model``), so optimizers and
    state dicts of either object see the same tensors. ``path`` is ``'compiled'`` until set to ``'eager'``
    (the model then runs as written, on the eager executor) or chosen by ``choose_path``; ``choice`` is the
    measurement that chose it (None where none did).
    """

    def __init__(self, model: nn.Module, options: dict):
        super().__init__()
        self.model = model
        self.options = dict(options)
        self._path = "compiled"
        self.choice: PathChoice | None = None
        forward_names = {name for name, _ in FORWARD_PASSES}
        self._call_options = {k: v for k, v in options.items() if k not in forward_names}
        self._forwards = Forwards([(name, fn) for name, fn in FORWARD_PASSES if options.get(name, True)])

    @property
    def forward_log(self) -> list[str]:
        """What capture did with the last call's forward (the passes that fired, or why it was not)."""
        return [str(line) for line in self._forwards.log]

    @property
    def path(self) -> str:
        """``'compiled'`` or ``'eager'``: how calls run now."""
        return self._path

    @path.setter
    def path(self, path: str) -> None:
        if path not in PATHS:
            raise ValueError(f"a compiled module's path is one of {PATHS}, not {path!r}")
        self._path = path

    def choose_path(
        self, step: Callable[[], object], *, what: str = "one call of the step", warmup: int = 2, calls: int = 5
    ) -> PathChoice:
        """Run ``step`` (which calls this module) on both paths, keep the faster in ``path`` and the measurement
        in ``choice`` (``gnnc.path_choice``: medians of ``calls`` timed calls after ``warmup``, state restored,
        so numbers after are those of the path chosen). ``step`` must not change parameters (no optimizer step).
        """

        def run(path: str) -> object:
            self.path = path
            return step()

        previous = self.path
        try:
            choice = measure(run, self, what=what, warmup=warmup, calls=calls)
        except BaseException:
            self.path = previous
            raise
        self.choice, self.path = choice, choice.path
        return choice

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._path == "eager":
            return self.model(*args, **kwargs)
        with compiling(self._call_options):
            return self._forwards(self.model, args, kwargs)


def compile(  # noqa: A001 - the public name gnnc.compile, as torch.compile
    model: nn.Module,
    backend: str = "auto",
    autotune: bool = False,
    **options: bool,
) -> CompiledModule:
    """A module computing the same function as ``model`` with compiled message passing.

    ``backend``: ``auto`` (numba kernels on CPU when numba is installed,
    Triton kernels on CUDA when triton is, else the torch reference),
    ``torch``, ``cpu`` or ``triton``. ``autotune``: where the cost model
    chooses an order per graph (``gnnc.ir.cost``), time the candidates
    on the first call instead and keep the fastest. ``options`` switch
    passes off by name (e.g. ``fuse=False``); plans are cached per UDF,
    bound module, graph schema, dtypes, device and backend.
    """
    backends.check_choice(backend)
    names = {*pass_names(), *(name for name, _ in FORWARD_PASSES)}
    unknown = set(options) - names
    if unknown:
        raise TypeError(f"unknown compile options {sorted(unknown)}; passes that can be switched off: {sorted(names)}")
    return CompiledModule(model, {"backend": backend, **options, **({"autotune": True} if autotune else {})})


def _forward_choice(compiled: CompiledModule, inputs: tuple) -> str:
    """``compiled``'s measured path for a forward of ``inputs`` without gradients, and why."""

    def forward() -> object:
        with torch.no_grad():
            return compiled(*inputs)

    choice = compiled.choose_path(forward, what="one forward without gradients")
    why = "compiling loses on this model and graph" if choice.path == "eager" else "compiling pays"
    return f"{choice}: {why}"


def explain(
    model: nn.Module,
    *inputs: Any,
    dot: str | None = None,
    backend: str = "auto",
    measure_paths: bool = False,
    **options: bool,
) -> str:
    """Run ``model(*inputs)`` compiled and describe the forward passes and every message-passing call.

    First the forward passes that rewrote the model's own code between calls (``== forward: ...``); last,
    where the forward could not be captured, why (``-- forward not captured: ...``).

    For each call: the backend that runs its plan (``[backend triton]`` for
    CUDA tensors under ``auto``, ``[backend torch]`` where it falls to the
    reference), the MP-DFG before and after optimization (one line per
    operator with residency, movement, shape and UDF line), the passes that
    fired, estimated FLOPs and intermediate bytes before/after, and what the
    cost model chose on this graph where a choice depends on it. With
    ``dot=PATH`` the optimized graphs are also written as Graphviz dot. With ``measure_paths`` the last line
    says which path ``CompiledModule.choose_path`` picks for this forward (without gradients) and the two
    medians it picked on (``== path: ...``).
    """
    compiled = compile(model, backend, **options)
    with recording() as plans, torch.no_grad():
        compiled(*inputs)
    log = compiled.forward_log
    sections, dots = [f"== forward: {line}" for line in log if not line.startswith("forward")], []
    for i, plan in enumerate(plans, 1):
        if plan.dfg is None:
            sections += [f"== call {i}: {plan.call}", f"   fell back to eager: {plan.fallback}"]
            continue
        assert plan.initial is not None and plan.context is not None, "a recorded plan that compiled"
        sections.append(f"== call {i}: {plan.call} [backend {plan.backend}]")
        before, after = estimate(plan.initial), estimate(plan.dfg)
        sections += [
            "-- MP-DFG as written (residency, movement, shape, source):",
            format_dfg(plan.initial),
            "-- after optimization:",
            format_dfg(plan.dfg),
            "-- passes:",
        ]
        sections += [f"   {line}" for line in plan.dfg.log] or ["   (none fired)"]
        sections.append(
            f"-- estimate: {before['flops']:,} -> {after['flops']:,} FLOPs; intermediates "
            f"{before['intermediate_bytes']:,} -> {after['intermediate_bytes']:,} bytes"
        )
        choices = cost_choices(plan.dfg, plan.context)
        if choices:
            sections += ["-- cost model on this graph (* chosen):"] + choices
        dots.append(to_dot(plan.dfg, f"call {i}"))
    sections += [f"-- {line}" for line in log if line.startswith("forward not")]
    if measure_paths:
        sections.append(f"== path: {_forward_choice(compiled, inputs)}")
    if dot is not None:
        with open(dot, "w") as f:
            f.write("\n".join(dots))
    return "\n".join(sections)
