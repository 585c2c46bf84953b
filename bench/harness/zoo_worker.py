"""One zoo row's timing in one system: ``python -m harness.zoo_worker CFG.json`` (``bench/zoo.py`` writes it).

The program (or its ``zoo_peers`` peer) is set up as ``world_worker.prepare`` sets it up for the gate, on the
graph of ``cfg["graph"]`` in float32, inputs requiring gradients as a layer's inputs inside a model do, and
with the parameters of ``cfg["state"]`` (written there by the first system, gnnc eager). Then, for each of
``cfg["modes"]``, ``harness.timing`` times it as the harness times every system: ``timing.make_step``'s
step (inference: eval, no grad; training: forward, sum loss, backward, SGD step), ``cfg["warmup"]`` warm-up
calls, ``cfg["runs"]`` timed ones, median and the resident set's high-water mark above the settled set.
Compiled (``gnnc-compiled``), one training step first under ``recording`` says which plans ran, and the
fallbacks' warnings are kept. The result goes to ``cfg["result_file"]``; a failure is a result too. Imports
gnnc only in the systems of the main interpreter, so the peer interpreter runs it too.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch

from . import timing, world_worker
from .world_programs import BY_NAME, load_shape


class Prepared:
    """What ``timing.make_step`` times: ``module`` (its mode and parameters) and ``call(tensors)``."""

    def __init__(self, module, run, graph):
        self.module, self.run, self.graph = module, run, graph

    def call(self, tensors):
        with self.graph.local_scope():  # what the layer writes into the graph does not pile up across calls
            return self.run(self.module, self.graph, tensors)


def plans_and_fallbacks(prepared: Prepared, tensors: dict) -> dict:
    """One training step under ``recording``: how many compiled plans ran and what fell back."""
    from gnnc.compiler.driver import recording

    with warnings.catch_warnings(record=True) as caught, recording() as plans:
        warnings.simplefilter("always")
        timing.make_step(prepared, tensors, "training")()
    return {"compiled_plans": sum(p.module is not None for p in plans), "fallbacks": world_worker.fallbacks(caught)}


def run(cfg: dict) -> dict:
    torch.set_num_threads(cfg["threads"])
    program, system = BY_NAME[cfg["program"]], cfg["system"]
    result = {"status": "ok", "system": system, "program": program.name, "torch": torch.__version__}
    try:
        model, _, call, graph, tensors = world_worker.prepare(
            system, program, Path(cfg["world_code"]), load_shape(cfg["graph"]), torch.float32, Path(cfg["state"])
        )
        if system == "gnnc-compiled":
            import gnnc

            model = gnnc.compile(model)
        prepared = Prepared(model, call, graph)
        if system == "gnnc-compiled":
            result.update(plans_and_fallbacks(prepared, tensors))
        for mode in cfg["modes"]:
            result[mode] = timing.timed_calls(timing.make_step(prepared, tensors, mode), cfg)
    except Exception as exc:  # noqa: BLE001 - a system that fails is a result: the row says how
        result.update(timing.failure(exc))
    return result


def main(cfg_file: str) -> None:
    cfg = json.loads(Path(cfg_file).read_text())
    Path(cfg["result_file"]).write_text(json.dumps(run(cfg)))


if __name__ == "__main__":
    main(sys.argv[1])
