"""Systems that run in another interpreter: the peer environment (DGL 2.1 on torch 2.2), found, fed, launched.

DGL's wheels need a torch far older than gnnc's, so the ``dgl`` and
``dgl-udf`` systems run in the interpreter of a virtual environment that
bench/peer_env.py builds once. For each (model, dataset, size) a subprocess
of the harness exports the case (``export_case``: graph, features, extra
inputs, the eager layer's parameters, and the gate's jittered inputs and
upstream gradients, made by this torch) to a plain ``.npz``. Each
configuration then runs ``python -m harness.peer_worker`` in the peer
interpreter (``run_config``): the same timed region as every other system
(``harness.timing``), under the same memory cap and timeout, and, for the
gate, its outputs and input gradients at the check points, written to
another ``.npz``. The verdict is given back here, in a harness subprocess
(``worker.peer_verdict``), by the same ``equivalence`` code against the
same eager oracle, so the gate on the DGL path is the gate everywhere.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import torch

STAMP = "gnnc-peer.json"  # written by bench/peer_env.py once the environment imports DGL
BUILD_COMMAND = "python bench/peer_env.py"
BENCH = Path(__file__).resolve().parents[1]
STDERR_TAIL = 600  # characters of the peer's stderr kept in an ERROR without a result


def default_env_path() -> Path:
    """``$GNNC_PEER_ENV``, else ``~/.cache/gnnc/peer-venv``."""
    return Path(os.environ.get("GNNC_PEER_ENV") or Path.home() / ".cache" / "gnnc" / "peer-venv")


def peer_python() -> Path | None:
    """The peer environment's interpreter, or None when it is not built."""
    env = default_env_path()
    python = env / "bin" / "python"
    return python if (env / STAMP).exists() and python.exists() else None


def stamp() -> dict | None:
    """The versions bench/peer_env.py recorded (None when not built)."""
    python = peer_python()
    return json.loads((python.parents[1] / STAMP).read_text()) if python else None


def missing() -> str | None:
    """None when the peer environment is built, else one line saying how to build it."""
    if peer_python() is not None:
        return None
    return (
        f"its peer environment (DGL 2.1 on torch 2.2) is not built at {default_env_path()}; build it once "
        f"with `{BUILD_COMMAND}` (about 2.5 GB downloaded; GNNC_PEER_ENV picks another folder)"
    )


def export_case(case, path: Path, seed: int, width: int) -> None:
    """Write ``case`` for the peer (``dgl_models.Bundle``): ``width`` is the compared view's column count."""
    from . import dgl_models, equivalence

    g, data = case.data.graph, case.data
    src, dst = g.find_edges()
    n = g.num_nodes()
    hetero = len(g.ntypes) > 1 or len(g.etypes) > 1
    etype = g.edge_type_ids() if hetero else torch.zeros(src.numel(), dtype=torch.int64)
    ntype = torch.zeros(n, dtype=torch.int64)
    for i in range(len(g.ntypes)):
        lo, hi = g.index.ntype_range(i)
        ntype[lo:hi] = i
    rels = g.canonical_etypes
    rel_src = torch.tensor([g.ntype_id(s) for s, _, _ in rels], dtype=torch.int64)
    rel_dst = torch.tensor([g.ntype_id(d) for _, _, d in rels], dtype=torch.int64)
    # the view picks and flattens rows: applied to the row ids, it says which rows it compares
    view_rows = case.model.view(torch.arange(n, dtype=torch.float64).unsqueeze(1), data)[:, 0].long()
    arrays = {}
    for k, point in enumerate([seed, *equivalence.retry_seeds(seed)]):
        arrays[f"check_x.{k}"] = equivalence.check_input(data.x, point)
        arrays[f"upstream.{k}"] = equivalence.upstream_gradient((view_rows.numel(), width), point)
    dgl_models.export(
        path,
        case.model.name,
        data.x,
        src,
        dst,
        n,
        etype,
        ntype,
        rel_src,
        rel_dst,
        view_rows,
        list(case.inputs),
        {k: v for k, v in case.eager.state_dict().items()},
        **arrays,
    )


def launch(command: list[str], env: dict, log_file: Path, timeout_s: float) -> int | None:
    """Run ``command`` in ``bench/`` in its own session, output to ``log_file``; its exit code, or None when
    it ran past ``timeout_s`` (then it and its children are killed)."""
    with open(log_file, "w") as log:
        proc = subprocess.Popen(
            command, cwd=BENCH, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def run_config(cfg: dict, timeout_s: float, mem_cap_bytes: int | None, folder: Path) -> dict:
    """Run ``harness.peer_worker`` on ``cfg`` in the peer interpreter; its result dict, or TIMEOUT / OOM /
    ERROR as ``runner.run_in_subprocess`` reports them."""
    python = peer_python()
    if python is None:
        return {"status": "ERROR", "error": f"system {cfg['system']!r} cannot run: {missing()}"}
    name = f"peer-{cfg['system']}-{cfg['model']}-{cfg['dataset']}-{cfg.get('mode') or 'check'}-{os.getpid()}"
    cfg_file, result_file, log_file = (folder / f"{name}.{ext}" for ext in ("json", "result.json", "log"))
    result_file.unlink(missing_ok=True)
    cfg_file.write_text(json.dumps({**cfg, "result_file": str(result_file), "mem_cap_bytes": mem_cap_bytes}))
    env = {**os.environ, "PYTHONPATH": str(BENCH), "DGLBACKEND": "pytorch", "PYTHONNOUSERSITE": "1"}
    if cfg.get("threads"):  # DGL's own kernels use OpenMP threads, torch's intra-op pool too
        env["OMP_NUM_THREADS"] = str(cfg["threads"])
    returncode = launch([str(python), "-m", "harness.peer_worker", str(cfg_file)], env, log_file, timeout_s)
    if returncode is None:
        return {"status": "TIMEOUT", "error": f"no result within {timeout_s:g} s"}
    if result_file.exists():
        return json.loads(result_file.read_text())
    if returncode == -signal.SIGKILL:
        return {"status": "OOM", "error": "killed by SIGKILL (the kernel's OOM killer)"}
    tail = log_file.read_text()[-STDERR_TAIL:].strip().replace("\n", " | ")
    return {"status": "ERROR", "error": f"peer interpreter exited with code {returncode}: {tail}"}
