"""What runs inside one configuration's subprocess: the equivalence check or the timing.

``child_main`` is the subprocess entry: it caps the process's memory, runs
the task and sends back its dict; an allocation failure anywhere becomes
status OOM and any other exception status ERROR, so a failing
configuration is recorded, never a crash of the run. Task configs are plain
dicts (see ``runner.task_config``).
"""
from __future__ import annotations

import dataclasses
import gc
import statistics
import time
import traceback
from pathlib import Path

import torch

from . import datasets, equivalence, floor, procfs
from .case import Case
from .models import MODELS
from .systems import REFERENCE, SYSTEMS

MODES = ("inference", "training")
SGD_LR = 1e-3


def child_main(task, arg, mem_cap_bytes: int | None, conn) -> None:
    """Run ``task(arg)`` under the memory cap; send its dict, or ``{"status": OOM | ERROR, "error": ...}``."""
    try:
        if mem_cap_bytes is not None:
            procfs.cap_memory(mem_cap_bytes)
        result = task(arg)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the parent
        status = "OOM" if procfs.is_out_of_memory(exc) else "ERROR"
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        result = {"status": status, "error": f"{type(exc).__name__}: {exc}"[:400] + at}
    conn.send(result)
    conn.close()


def _case(cfg: dict, quick: bool) -> Case:
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    data = datasets.load(cfg["dataset"], quick, cfg["seed"], Path(cfg["data_root"]), cfg["scale"])
    return Case.build(MODELS[cfg["model"]], data, cfg["seed"])


def _describe(case: Case) -> dict:
    g = case.data.graph
    params = sum(p.numel() for p in case.eager.parameters())
    return {"size": case.data.size, "nodes": g.num_nodes(), "edges": g.num_edges(),
            "relations": len(g.etypes), "node_types": len(g.ntypes), "in_dim": case.data.x.shape[1],
            "shape": dataclasses.asdict(floor.shape_of(g, case.data.x.shape[1], params))}


def check_config(cfg: dict) -> dict:
    """Gate ``cfg["systems"]`` against the eager layer (input gradients too when ``cfg["gradients"]``).

    A failure of the eager layer fails the whole check; a system that fails
    to build or run gets its own status (OOM or ERROR).
    """
    case = _case(cfg, cfg["check_quick"])
    seed, gradients = cfg["seed"], cfg["gradients"]
    x = equivalence.check_input(case.data.x, seed)
    expected = equivalence.evaluate(SYSTEMS[REFERENCE].prepare(case), x, seed, gradients)
    verdicts = {}
    for name in cfg["systems"]:
        try:
            got = equivalence.evaluate(SYSTEMS[name].prepare(case), x, seed, gradients)
            verdicts[name] = equivalence.compare(got, expected)
        except Exception as exc:  # noqa: BLE001 - one system's failure must not hide the others'
            status = "OOM" if procfs.is_out_of_memory(exc) else "ERROR"
            verdicts[name] = {"status": status, "detail": f"in the check: {type(exc).__name__}: {exc}"[:400]}
    return {"status": "ok", "verdicts": verdicts, **_describe(case)}


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for item in out if item is not None for t in _tensors(item)]


def make_step(prepared, x: torch.Tensor, mode: str):
    """One inference forward (no autograd), or one training step: forward, sum loss, backward, SGD update."""
    if mode == "inference":
        prepared.module.eval()

        def step():
            with torch.no_grad():
                prepared.call(x)
        return step
    if mode != "training":
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    prepared.module.train()
    opt = torch.optim.SGD(prepared.module.parameters(), lr=SGD_LR)

    def step():
        opt.zero_grad(set_to_none=True)
        sum(t.sum() for t in _tensors(prepared.call(x))).backward()
        opt.step()
    return step


def measure(step, warmup: int, runs: int, min_runs: int, budget_s: float) -> list[float]:
    """Seconds of each timed call after ``warmup`` untimed ones; stops after ``min_runs`` once
    ``budget_s`` of timed calls have passed, else after ``runs``."""
    for _ in range(warmup):
        step()
    times = []
    while len(times) < runs and (len(times) < min_runs or sum(times) < budget_s):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def time_config(cfg: dict) -> dict:
    """Median time and peak extra memory of one (model, dataset, system, mode)."""
    case = _case(cfg, cfg["quick"])
    prepared = SYSTEMS[cfg["system"]].prepare(case)
    step = make_step(prepared, case.data.x, cfg["mode"])
    described = _describe(case)
    gc.collect()
    procfs.trim_heap()
    before = procfs.status_kib("VmRSS")
    procfs.reset_peak()
    times = measure(step, cfg["warmup"], cfg["runs"], cfg["min_runs"], cfg["budget_s"])
    peak_kib = procfs.status_kib("VmHWM") - before
    result = {"status": "ok", "time_ms": 1e3 * statistics.median(times), "times_ms": [1e3 * t for t in times],
              "peak_mib": peak_kib / 1024, "threads": torch.get_num_threads(), **described}
    if cfg["profile"]:
        result["profile"] = profile_step(step)
    return result


def profile_step(step, rows: int = 20) -> str:
    """torch.profiler's table of one more step (after the timed ones), operators by self CPU time."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)
