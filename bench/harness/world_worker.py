"""One world-code program in one system: ``python -m harness.world_worker SYSTEM PROGRAM WORLD_CODE STATE OUT``.

SYSTEM is ``dgl`` (the peer interpreter's real DGL), ``gnnc`` (gnnc's DGL alias, eager) or ``gnnc-compiled``
(the alias, the model wrapped in ``gnnc.compile``). The program's file is imported unchanged (DGL's run gets
back the DGL 0.x built-ins ``LEGACY_NAMES`` that DGL 1.0 removed). Its layer is built with the program's
dtype (float64 unless it says float32) as torch's default, turned to that dtype and given the parameters in
STATE (``.npz``; written there first when STATE does not exist, which the eager gnnc run does), then trained
two steps: forward, loss = sum of each output times a fixed weight of its shape, backward, SGD (lr 0.05).
OUT (``.npz``) gets every step's outputs, input gradients and parameter gradients; ``OUT.json`` says how it
went: ``status`` ok or error (with the exception and the world-code line it came from) and, compiled, the
plans that ran and the fallbacks. Imports gnnc only in the gnnc systems, so it runs in the peer interpreter
too.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch

from .world_programs import BY_NAME

STEPS, LR, SEED = 2, 0.05, 0
STUBS = Path(__file__).resolve().parent / "world_stubs"


def loss_weight(shape) -> torch.Tensor:
    """The same fixed weights in both interpreters: cos of the flat position."""
    return torch.cos(torch.arange(int(np.prod(shape)), dtype=torch.float64)).reshape(shape)


def flat_outputs(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = [out[k] for k in sorted(out)]
    return [t for item in out for t in flat_outputs(item)]


def import_program(program, world_code: Path):
    sys.path[:0] = [str(world_code / program.path)] + ([str(STUBS / program.stubs)] if program.stubs else [])
    return importlib.import_module(program.module)


# DGL 0.x's built-ins, removed in DGL 1.0 and kept by gnnc (``gnnc.function``); world code from before 1.0
# (benchmarking-gnns, graphtransformer) calls them, with their own argument names, so DGL 2.1's run gets them
LEGACY_NAMES = {
    "copy_src": lambda fn: lambda src, out: fn.copy_u(src, out),
    "copy_edge": lambda fn: lambda edge, out: fn.copy_e(edge, out),
    "src_mul_edge": lambda fn: lambda src, edge, out: fn.u_mul_e(src, edge, out),
}


def legacy_names(function_module) -> None:
    for old, make in LEGACY_NAMES.items():
        if not hasattr(function_module, old):
            setattr(function_module, old, make(function_module))


def load_state(model, state: Path) -> None:
    if state.exists():
        arrays = np.load(state)
        model.load_state_dict({k: torch.from_numpy(arrays[k]) for k in arrays.files})
    else:
        np.savez(state, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def train(model, params: dict, run, graph, tensors: dict) -> dict:
    """Each step sees the graph's features as the program got them (a training loop's next batch would be a new
    graph): what a layer left in ``g.ndata`` belongs to the step before, whose autograd graph is freed."""
    arrays = {}
    for step in range(STEPS):
        with graph.local_scope() if graph is not None else contextlib.nullcontext():
            outs = flat_outputs(run(model, graph, tensors))
        loss = sum((o * loss_weight(o.shape).to(o.dtype)).sum() for o in outs)
        loss.backward()
        for i, o in enumerate(outs):
            arrays[f"{step}.out.{i}"] = o.detach().numpy()
        for name, x in tensors.items():
            arrays[f"{step}.input_grad.{name}"] = x.grad.numpy().copy() if x.grad is not None else np.zeros(0)
            x.grad = None
        with torch.no_grad():
            for name, p in params.items():
                if p.grad is not None:
                    arrays[f"{step}.grad.{name}"] = p.grad.numpy().copy()
                    p -= LR * p.grad
                    p.grad = None
    return arrays


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def world_line(tb) -> str:
    """The innermost frame of the traceback in a world-code file, as ``file:line``."""
    frames = [f for f in traceback.extract_tb(tb) if "world-code" in f.filename or "world_stubs" in f.filename]
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


def main(system: str, name: str, world_code: str, state: str, out: str) -> None:
    program, meta = BY_NAME[name], {"status": "ok"}
    compiled = system == "gnnc-compiled"
    if system.startswith("gnnc"):
        from gnnc.compat import dgl as alias

        alias.install()
    import dgl

    if system == "dgl":
        legacy_names(dgl.function)
    torch.set_default_dtype(BY_NAME[name].dtype)  # tensors a layer makes itself (th.zeros, th.Tensor) too
    plans = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = import_program(program, Path(world_code))
            graph, tensors, run = program.inputs(dgl, np.random.RandomState(SEED))
            tensors = {k: v.detach().to(program.dtype).requires_grad_() for k, v in tensors.items()}
            torch.manual_seed(SEED)
            model = program.build(module, graph).to(program.dtype)
            load_state(model, Path(state))
            params = dict(model.named_parameters())
            if compiled:
                import gnnc
                from gnnc.compiler.driver import recording

                model = gnnc.compile(model)
                with recording() as plans:
                    arrays = train(model, params, run, graph, tensors)
            else:
                arrays = train(model, params, run, graph, tensors)
        np.savez(out, **arrays)
    except Exception as error:  # noqa: BLE001 - a program that fails is a result: its row says how
        meta = {
            "status": "error",
            "error": f"{type(error).__name__}: {first_line(str(error))}",
            "where": world_line(error.__traceback__),
        }
    if compiled:
        meta["compiled_plans"] = sum(p.module is not None for p in plans)
        meta["fallbacks"] = sorted(
            {first_line(str(w.message)) for w in caught if w.category.__name__ == "FallbackWarning"}
        )
    Path(out + ".json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main(*sys.argv[1:6])
