"""What runs inside one subprocess: building a dataset, the eager oracle, a check, one configuration's
timing, or its profile.

``child_main`` is the subprocess entry: it caps the process's memory, runs
the task and sends back its dict; an allocation failure anywhere becomes
status OOM and any other exception status ERROR, so a failing
configuration is recorded, never a crash of the run. Task configs are plain
dicts (see ``runner.task_config``).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import os
import threading
from pathlib import Path

import torch
from tqdm import tqdm

from . import datasets, devices, equivalence, floor, procfs, profiling, torch_logs
from .case import Case, Prepared
from .models import MODELS
from .systems import REFERENCE, SYSTEMS
from .timing import MODES, failure, make_step, timed_calls  # noqa: F401 - MODES re-exported (runner, cli)


def child_main(task, arg, mem_cap_bytes: int | None, conn) -> None:
    """Run ``task(arg)`` under the memory cap; send its dict, or ``{"status": OOM | ERROR, "error": ...}``,
    with the warnings torch logged meanwhile under ``torch_warnings`` (``torch_logs``)."""
    # The forkserver's imports are never garbage: keep every later gc.collect from walking them.
    gc.freeze()
    # torch.fx's Interpreter makes a (disabled) tqdm on every run, and tqdm's default lock is a named semaphore
    # that this process, killed at its timeout or while it exits, leaves to the parent's resource_tracker
    # ("leaked semaphore objects"); no other process writes this one's bars.
    tqdm.set_lock(threading.RLock())
    with torch_logs.caught() as warned:
        try:
            if mem_cap_bytes is not None:
                procfs.cap_memory(mem_cap_bytes)
            result = task(arg)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported to the parent
            result = failure(exc)
    if warned:
        result["torch_warnings"] = warned
    conn.send(result)
    conn.close()


def use_cuda(_arg) -> dict:
    """Ok when this process can run a CUDA kernel (an error, via ``child_main``, when it cannot)."""
    torch.ones(1, device="cuda").add_(1).item()
    return {"status": "ok"}


def build_dataset(cfg: dict) -> dict:
    """Build dataset ``cfg["dataset"]`` at the size ``cfg["size_quick"]`` says and save it to ``cfg["path"]``."""
    _threads(cfg)
    data = datasets.load(cfg["dataset"], cfg["size_quick"], cfg["seed"], Path(cfg["data_root"]), cfg["scale"])
    datasets.save(data, Path(cfg["path"]))
    return {"status": "ok"}


def _threads(cfg: dict) -> None:
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])


def _case(cfg: dict) -> Case:
    """The case of ``cfg`` on ``cfg["device"]``: its dataset read from ``cfg["data_file"]`` when the run saved
    it, else built here. On a GPU, ``cfg["gpu_mem_cap_bytes"]`` (when set) caps torch's CUDA allocator."""
    _threads(cfg)
    if cfg.get("scratch"):  # torch.compile's cache (pyg-compile): empty per process, so compiles are cold
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cfg["scratch"]) / f"inductor-{os.getpid()}")
    device = cfg.get("device", "cpu")
    if device == "cuda" and cfg.get("gpu_mem_cap_bytes"):
        devices.cap_gpu_memory(cfg["gpu_mem_cap_bytes"])
    if cfg.get("data_file"):
        data = datasets.load_saved(Path(cfg["data_file"]))
    else:
        data = datasets.load(cfg["dataset"], cfg["size_quick"], cfg["seed"], Path(cfg["data_root"]), cfg["scale"])
    return Case.build(MODELS[cfg["model"]], data, cfg["seed"], device)


def _prepare(system: str, case: Case) -> Prepared:
    """System ``system``'s runnable of ``case``, its module on the case's device (a PyG layer is built on the
    CPU, its parameters copied from the eager layer)."""
    prepared = SYSTEMS[system].prepare(case)
    prepared.module.to(case.device)
    return prepared


def _describe(case: Case) -> dict:
    g = case.data.graph
    params = sum(p.numel() for p in case.eager.parameters())
    return {
        "size": case.data.size,
        "nodes": g.num_nodes(),
        "edges": g.num_edges(),
        "relations": len(g.etypes),
        "node_types": len(g.ntypes),
        "in_dim": case.data.x.shape[1],
        "shape": dataclasses.asdict(floor.shape_of(g, case.data.x.shape[1], params)),
    }


def oracle_config(cfg: dict) -> dict:
    """The eager layer's gate results for ``cfg["modes"]``, saved to ``cfg["oracle_file"]``; the graph's
    description is returned."""
    case = _case(cfg)
    x = equivalence.check_input(case.data.x, cfg["seed"])
    eager = _prepare(REFERENCE, case)
    equivalence.save_oracle(
        {mode: equivalence.evaluate(eager, x, cfg["seed"], mode == "training") for mode in cfg["modes"]},
        Path(cfg["oracle_file"]),
    )
    return {"status": "ok", **_describe(case)}


def check_prepared(prepared, case: Case, oracle: dict, mode: str, seed: int) -> dict:
    """The gate's verdict on ``prepared`` for ``mode`` against the eager ``oracle`` (rechecked at other
    jitter points when only the input gradients differ); a system that fails to run gets status OOM or
    ERROR."""
    try:
        x = equivalence.check_input(case.data.x, seed)
        verdict = equivalence.compare(equivalence.evaluate(prepared, x, seed, mode == "training"), oracle[mode])
        return equivalence.recheck(_prepare(REFERENCE, case), prepared, case.data.x, seed, verdict)
    except Exception as exc:  # noqa: BLE001 - recorded as the verdict
        found = failure(exc, "in the check: ")
        return {"status": found["status"], "detail": found["error"]}


def check_config(cfg: dict) -> dict:
    """Verdicts ``{mode: verdict}`` of system ``cfg["system"]`` against the saved oracle, before any timing
    (the gate at quick size). A mode is checked only if the ones before it passed."""
    case = _case(cfg)
    oracle = equivalence.load_oracle(Path(cfg["oracle_file"]))
    prepared = _prepare(cfg["system"], case)
    verdicts, failed = {}, None
    for mode in cfg["modes"]:
        verdicts[mode] = failed or check_prepared(prepared, case, oracle, mode, cfg["seed"])
        if verdicts[mode]["status"] != "ok":
            failed = verdicts[mode]
    return {"status": "ok", "verdicts": verdicts}


def time_config(cfg: dict) -> dict:
    """Median time and peak extra memory of one (model, dataset, system, mode) on ``cfg["device"]``.

    Memory (MiB; on the CPU the resident set, on a GPU torch's CUDA
    allocations, see ``devices``): ``peak_mib`` is the high-water mark of
    the warm-up and timed calls above what was in use before them;
    ``retained_mib`` what the warm-up left in use (plans, caches, loaded
    kernels); on the CPU library code pages are mapped before (``libraries_mapped``:
    whether the kernel could), so they never count; ``steady_peak_mib`` the high-water mark of the calls after
    warm-up (the warm-up repeated, then the timed calls) above what was in use after warm-up (what one more
    call needs).

    With ``cfg["oracle_file"]`` the system is then checked against the
    eager oracle (``check``: the verdict), on the parameters it had before
    the timed calls.
    """
    case = _case(cfg)
    prepared = _prepare(cfg["system"], case)
    step = make_step(prepared, case.data.x, cfg["mode"])
    initial = copy.deepcopy(prepared.module.state_dict()) if cfg["oracle_file"] else None
    result = {**timed_calls(step, cfg), **_describe(case)}
    if initial is not None:
        prepared.module.load_state_dict(initial)  # the training steps moved the parameters
        oracle = equivalence.load_oracle(Path(cfg["oracle_file"]))
        result["check"] = check_prepared(prepared, case, oracle, cfg["mode"], cfg["seed"])
    return result


def profile_config(cfg: dict) -> dict:
    """``profiling.profile_calls`` of one configuration after its warm-up calls (its own subprocess, so a
    slow or memory-hungry profile never costs the timed row).

    The profiled calls may grow the address space by ``cfg["profile_extra_bytes"]`` at most; with
    ``cfg["fixed_mmap"]`` large allocations are each mmapped (``procfs.fix_mmap_threshold``).
    """
    case = _case(cfg)
    prepared = _prepare(cfg["system"], case)
    step = make_step(prepared, case.data.x, cfg["mode"])
    for _ in range(cfg["warmup"]):
        step()
    if cfg["fixed_mmap"]:
        procfs.fix_mmap_threshold()
    procfs.cap_memory(cfg["profile_extra_bytes"])
    return {
        "status": "ok",
        "fixed_mmap": cfg["fixed_mmap"],
        **profiling.profile_calls(step, cfg["profile_calls"], cfg["profile_rows"]),
    }


def export_peer(cfg: dict) -> dict:
    """The case of ``cfg`` written for the peer interpreter to ``cfg["path"]`` (``peer.export_case``); the
    graph's description (``_describe``), which the peer's rows carry as every row does."""
    from . import peer
    from .models import HIDDEN

    case = _case(cfg)
    peer.export_case(case, Path(cfg["path"]), cfg["seed"], HIDDEN)
    return {"status": "ok", **_describe(case)}


def _peer_result(outputs, mode: str, k: int):
    grad = outputs.get(f"{mode}.grad.{k}")
    return torch.from_numpy(outputs[f"{mode}.out.{k}"]), None if grad is None else torch.from_numpy(grad)


def peer_verdict(cfg: dict) -> dict:
    """Verdicts ``{mode: verdict}`` on the outputs a peer system wrote (``cfg["outputs_file"]``) against the
    eager oracle, as ``check_prepared`` gives them: when only the input gradients differ, eager is
    evaluated at the further jitter points and compared with the peer's outputs there. A mode is judged
    only if the ones before it passed (as ``check_config``)."""
    import numpy as np

    oracle = equivalence.load_oracle(Path(cfg["oracle_file"]))
    with np.load(cfg["outputs_file"]) as z:
        outputs = {k: z[k] for k in z.files}
    case, eager = None, None
    verdicts, failed = {}, None
    for mode in cfg["modes"]:
        if failed is not None:
            verdicts[mode] = failed
            continue
        if f"{mode}.error" in outputs:
            verdicts[mode] = {
                "status": bytes(outputs[f"{mode}.status"]).decode(),
                "detail": bytes(outputs[f"{mode}.error"]).decode(),
            }
        else:
            first = equivalence.compare(_peer_result(outputs, mode, 0), oracle[mode])
            points = equivalence.retry_seeds(cfg["seed"])

            def check_at(point, mode=mode, points=points):
                nonlocal case, eager
                if case is None:
                    case = _case(cfg)
                    eager = _prepare(REFERENCE, case)
                x = equivalence.check_input(case.data.x, point)
                return equivalence.compare(
                    _peer_result(outputs, mode, 1 + points.index(point)), equivalence.evaluate(eager, x, point, True)
                )

            verdicts[mode] = equivalence.recheck_with(first, cfg["seed"], check_at)
        if verdicts[mode]["status"] != "ok":
            failed = verdicts[mode]
    return {"status": "ok", "verdicts": verdicts}
