"""One world-code program in one system:
``python -m harness.world_worker SYSTEM PROGRAM WORLD_CODE STATE OUT [GRAPH]``.

SYSTEM is ``dgl`` (the peer interpreter's real DGL), ``gnnc`` (gnnc's DGL alias, eager), ``gnnc-compiled``
(the alias, the model wrapped in ``gnnc.compile``), or a ``zoo_peers`` system: ``dgl-builtin`` (DGL's
``dgl.nn`` module computing the program's function) or ``pyg`` (PyG's). The program's file is imported
unchanged (DGL's run gets back the DGL 0.x built-ins ``LEGACY_NAMES`` that DGL 1.0 removed). Its layer (or
the peer) is built with the program's dtype (float64 unless it says float32) as torch's default, on the
small random test graph, or on GRAPH (a ``.npz`` ``world_programs.load_shape`` reads), turned to that dtype
and given the parameters in STATE (``.npz``; written there first when STATE does not exist, which the eager
gnnc run does; a peer takes them under its names), then trained two steps: forward, loss = sum of each
output times a fixed weight of its shape, backward, SGD (lr 0.05). OUT (``.npz``) gets every step's outputs,
input gradients and parameter gradients (a peer's under the program's names); ``OUT.json`` says how it went:
``status`` ok or error (with the exception and the world-code line it came from) and, compiled, the plans
that ran and the fallbacks. Imports gnnc only in the systems of the main interpreter, so it runs in the peer
interpreter too.
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

from . import zoo_peers
from .world_programs import BY_NAME, TEST, load_shape

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


def load_state(model, state: Path, peer=None) -> None:
    """The parameters and buffers in ``state`` (a peer's under its names), or written there when absent."""
    if state.exists():
        arrays = np.load(state)
        names = {k: peer.peer_name(k) if peer else k for k in arrays.files}
        model.load_state_dict({names[k]: torch.from_numpy(arrays[k]) for k in arrays.files if names[k]})
    else:
        np.savez(state, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def build(system: str, program, module, graph, width: int):
    """``(model, peer)``: the program's layer (peer None), or its ``zoo_peers`` peer in that system."""
    if system not in zoo_peers.SYSTEMS:
        return program.build(module, graph, width), None
    peer = zoo_peers.BY_PROGRAM_SYSTEM.get((program.name, system))
    if peer is None:
        raise ValueError(f"program {program.name!r} has no {system} peer")
    return peer.build(importlib.import_module(zoo_peers.SYSTEMS[system]), module, width), peer


def named_parameters(model, peer) -> dict:
    """The model's parameters under the program's names (a peer's mapped back)."""
    params = dict(model.named_parameters())
    return {peer.program_name(k): p for k, p in params.items()} if peer else params


def run_of(peer, run):
    """The forward call: the peer's own where it has one, else the program's."""
    return peer.call if peer is not None and peer.call is not None else run


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


def import_dgl(system: str):
    """DGL as ``system`` sees it: gnnc's alias for the gnnc systems and PyG (whose peer reads the graph the
    program built), DGL 2.1 itself in the peer interpreter (with ``LEGACY_NAMES``)."""
    if system in ("dgl", "dgl-builtin"):
        import dgl

        legacy_names(dgl.function)
        return dgl
    from gnnc.compat import dgl as alias

    alias.install()
    import dgl

    return dgl


def prepare(system: str, program, world_code: Path, shape, dtype: torch.dtype, state: Path) -> tuple:
    """``(model, params, run, graph, tensors)`` of ``program`` in ``system`` on ``shape``, in ``dtype``: the
    tensors require gradients, ``params`` holds the parameters under the program's names."""
    dgl = import_dgl(system)
    torch.set_default_dtype(dtype)  # tensors a layer makes itself (th.zeros, th.Tensor) too
    module = import_program(program, world_code)
    graph, tensors, run = program.inputs(dgl, np.random.RandomState(SEED), shape)
    tensors = {k: v.detach().to(dtype).requires_grad_() for k, v in tensors.items()}
    torch.manual_seed(SEED)
    model, peer = build(system, program, module, graph, shape.width)
    model = model.to(dtype)
    load_state(model, state, peer)
    return model, named_parameters(model, peer), run_of(peer, run), graph, tensors


def fallbacks(caught) -> list[str]:
    """The first lines of the ``FallbackWarning``s among ``caught``, each once."""
    return sorted({first_line(str(w.message)) for w in caught if w.category.__name__ == "FallbackWarning"})


def main(system: str, name: str, world_code: str, state: str, out: str, graph: str | None = None) -> None:
    program, meta = BY_NAME[name], {"status": "ok"}
    compiled = system == "gnnc-compiled"
    shape = load_shape(graph) if graph else TEST
    plans = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, params, run, graph, tensors = prepare(
                system, program, Path(world_code), shape, program.dtype, Path(state)
            )
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
        meta["fallbacks"] = fallbacks(caught)
    Path(out + ".json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main(*sys.argv[1:7])
