"""The world-code gate: one program in one system in its own process (``world_worker``), and the verdict of
its outputs, input gradients and parameter gradients against the oracle's (``bench/world_code.py`` and
``bench/zoo.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from . import peer

BENCH = Path(__file__).resolve().parents[1]
PEER_SYSTEMS = ("dgl", "dgl-builtin")  # run by the peer interpreter (DGL 2.1)
FLOAT32_TOLERANCES = (1e-4, 1e-6)


def tolerances(program, rtol: float, atol: float) -> tuple[float, float]:
    """``rtol``/``atol`` for float64 programs; float32 ones get float32's (``FLOAT32_TOLERANCES``)."""
    return (rtol, atol) if program.dtype == torch.float64 else FLOAT32_TOLERANCES


def worker_env(threads: int) -> dict:
    """A worker's environment: the harness and gnnc's source importable, ``threads`` OpenMP threads."""
    path = os.pathsep.join([str(BENCH), str(BENCH.parent / "src")])
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PYTHONDONTWRITEBYTECODE": "1",
        "DGLBACKEND": "pytorch",
        "OMP_NUM_THREADS": str(threads),
    }


def python_for(system: str) -> str:
    return str(peer.peer_python()) if system in PEER_SYSTEMS else sys.executable


def run(system: str, program: str, world_code: Path, folder: Path, timeout: float, graph: Path | None = None) -> dict:
    """One worker process (on ``graph``, else the small random test graph); its ``OUT.json`` (plus ``out``,
    the arrays' file), or why there is none."""
    out = folder / f"{program}.{system}.npz"
    command = [
        python_for(system),
        "-m",
        "harness.world_worker",
        system,
        program,
        str(world_code),
        str(folder / f"{program}.state.npz"),
        str(out),
        *([str(graph)] if graph else []),
    ]
    try:
        done = subprocess.run(
            command, check=False, cwd=BENCH, env=worker_env(1), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"no result within {timeout:g} s"}
    meta = Path(f"{out}.json")
    if not meta.exists():
        tail = (done.stderr or done.stdout)[-400:].strip().replace("\n", " | ")
        return {"status": "error", "error": f"worker exited with code {done.returncode}: {tail}"}
    return {**json.loads(meta.read_text()), "out": str(out)}


def compare(ours: dict, theirs: dict, rtol: float, atol: float) -> str:
    """``match``, or what differs: a missing array, a shape, or the largest difference and where."""
    a, b = np.load(ours["out"]), np.load(theirs["out"])
    if set(a.files) != set(b.files):
        return (
            f"arrays differ: only ours {sorted(set(a.files) - set(b.files))[:3]}, "
            f"only the oracle's {sorted(set(b.files) - set(a.files))[:3]}"
        )
    worst = (0.0, "")
    for key in sorted(a.files):
        if a[key].shape != b[key].shape:
            return f"{key}: shape {a[key].shape} against the oracle's {b[key].shape}"
        if not np.allclose(a[key], b[key], rtol=rtol, atol=atol, equal_nan=True):
            diff = float(np.nanmax(np.abs(a[key] - b[key])))
            worst = max(worst, (diff, key))
    return "match" if not worst[1] else f"mismatch: max |diff| {worst[0]:.3g} at {worst[1]}"


def verdict(result: dict, oracle: dict, rtol: float, atol: float) -> str:
    """``match``, what differs, or why there is nothing to compare."""
    if result["status"] != "ok":
        return f"error: {result['error']}" + (f" ({result['where']})" if result.get("where") else "")
    if oracle["status"] != "ok":
        return "no oracle (DGL failed)"
    return compare(result, oracle, rtol, atol)
