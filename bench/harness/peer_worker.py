"""One configuration of a DGL system, run by the peer interpreter: ``python -m harness.peer_worker CFG.json``.

Reads the case that ``peer.export_case`` wrote, builds the system
(``dgl_models.BUILDERS``), times it with ``harness.timing`` exactly as the
harness times its own systems (when ``cfg["mode"]`` is set), then, when
``cfg["outputs_file"]`` is set, restores the parameters it had before the
timed calls and writes its outputs and input gradients at the gate's check
points (the jittered inputs and upstream gradients the export holds) for
``worker.peer_verdict`` to judge. Its result goes to ``cfg["result_file"]``
as JSON; a failure anywhere is a result too (OOM or ERROR). Imports no gnnc.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

from . import equivalence, procfs, timing
from .dgl_models import BUILDERS, Bundle


def _outputs(prepared, b: Bundle, modes: list[str]) -> dict:
    """``{"<mode>.out.<k>" / "<mode>.grad.<k>": array}`` at check point k (training: every point, for the
    gate's retries; inference: the first), or ``{"<mode>.error": message}`` where the system failed."""
    out = {}
    points = sum(k.startswith("check_x.") for k in b.arrays)
    for mode in modes:
        gradients = mode == "training"
        try:
            for k in range(points if gradients else 1):
                got, grad = equivalence.evaluate(
                    prepared, b.arrays[f"check_x.{k}"], 0, gradients, upstream=b.arrays[f"upstream.{k}"]
                )
                out[f"{mode}.out.{k}"] = got.detach().numpy()
                if grad is not None:
                    out[f"{mode}.grad.{k}"] = grad.detach().numpy()
        except Exception as exc:  # noqa: BLE001 - the verdict says so
            found = timing.failure(exc, "in the check: ")
            out = {k: v for k, v in out.items() if not k.startswith(f"{mode}.")}
            out[f"{mode}.status"] = np.frombuffer(found["status"].encode(), dtype=np.uint8)
            out[f"{mode}.error"] = np.frombuffer(found["error"].encode(), dtype=np.uint8)
    return out


def run(cfg: dict) -> dict:
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    import dgl

    if cfg.get("mem_cap_bytes"):
        procfs.cap_memory(cfg["mem_cap_bytes"])
    b = Bundle.load(Path(cfg["peer_file"]))
    prepared = BUILDERS[cfg["system"]](b)
    result = {"status": "ok", "peer": {"torch": torch.__version__, "dgl": dgl.__version__}}
    initial = copy.deepcopy(prepared.module.state_dict())
    if cfg.get("mode"):
        result.update(timing.timed_calls(timing.make_step(prepared, b.x, cfg["mode"]), cfg))
        prepared.module.load_state_dict(initial)  # the training steps moved the parameters
    if cfg.get("outputs_file"):
        np.savez(cfg["outputs_file"], **_outputs(prepared, b, cfg["check_modes"]))
    return result


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(argv[0]).read_text())
    try:
        result = run(cfg)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the harness
        result = timing.failure(exc)
    tmp = Path(cfg["result_file"] + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, cfg["result_file"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
