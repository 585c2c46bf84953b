"""A benchmark run: the plan, one fresh subprocess per configuration, and the JSON results file.

Every (model, dataset) pair is first gated: one subprocess checks each
non-eager system against the eager oracle. Then every (mode, system)
configuration is timed in its own subprocess, forked from a forkserver that
has imported torch, torch_geometric and gnnc but run nothing, so each
configuration starts from the same clean state and its peak memory is its
own. A configuration that runs past the timeout is killed and recorded as
TIMEOUT; one that exceeds the memory cap (or is killed by the kernel) as
OOM; a mismatching or unverifiable system is recorded and never timed.
"""
from __future__ import annotations

import datetime
import functools
import json
import multiprocessing as mp
import os
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from . import floor, machine, worker
from .datasets import DATASETS, missing_files
from .models import MODELS, datasets_for
from .systems import REFERENCE, SYSTEMS

FORKSERVER_PRELOAD = ["torch", "torch_geometric", "gnnc", "harness.worker"]
TIMED = ("ok", "DIFFERS")  # gate verdicts that let a system be timed


@dataclass
class Settings:
    """Everything a run depends on (recorded in the JSON with its results)."""

    models: list[str]
    datasets: list[str]
    systems: list[str]
    modes: list[str] = field(default_factory=lambda: list(worker.MODES))
    quick: bool = False
    seed: int = 0
    warmup: int = 2
    runs: int = 10
    min_runs: int = 3
    budget_s: float = 60.0
    timeout_s: float = 600.0
    mem_cap_bytes: int | None = None
    data_root: str = ""
    scale: float | None = None
    threads: int | None = None  # torch threads per configuration (None: torch's default, all cores)
    profile_dir: str | None = None  # where to write one profiled step per timed configuration
    command: str = ""


@functools.cache
def _context():
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    return ctx


def run_in_subprocess(task, arg, timeout_s: float, mem_cap_bytes: int | None = None) -> dict:
    """``task(arg)`` in a fresh subprocess (``worker.child_main``); TIMEOUT / OOM / ERROR dicts on failure."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=worker.child_main, args=(task, arg, mem_cap_bytes, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout_s):
            return {"status": "TIMEOUT", "error": f"no result within {timeout_s:g} s"}
        return recv.recv()
    except EOFError:
        proc.join()
        if proc.exitcode == -signal.SIGKILL:
            return {"status": "OOM", "error": "killed by SIGKILL (the kernel's OOM killer)"}
        return {"status": "ERROR", "error": f"subprocess died with exit code {proc.exitcode}"}
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


def validate(s: Settings) -> None:
    """SystemExit naming the culprit for unknown names, unavailable systems or missing real data."""
    for kind, names, known in (("model", s.models, MODELS), ("dataset", s.datasets, DATASETS),
                               ("system", s.systems, SYSTEMS), ("mode", s.modes, worker.MODES)):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"gnnc bench: unknown {kind}(s) {unknown}; known: {', '.join(known)}")
    for name in s.systems:
        why = SYSTEMS[name].available()
        if why:
            raise SystemExit(f"gnnc bench: system {name!r} cannot run here: {why}")
    for name in s.datasets:
        missing = missing_files(name, Path(s.data_root))
        if missing:
            raise SystemExit(f"gnnc bench: dataset {name!r} needs {missing}; set GNNC_DATA (or --data-dir) "
                             f"to the folder holding planetoid/ and kg/, or leave {name} out of --datasets")


def task_config(s: Settings, model: str, dataset: str, **extra) -> dict:
    """The dict a worker task reads (``worker.check_config`` / ``worker.time_config``)."""
    return {"model": model, "dataset": dataset, "seed": s.seed, "data_root": s.data_root, "scale": s.scale,
            "quick": s.quick, "threads": s.threads, "warmup": s.warmup, "runs": s.runs, "min_runs": s.min_runs,
            "budget_s": s.budget_s, "profile": s.profile_dir is not None, **extra}


def _check(s: Settings, model: str, dataset: str, systems: list[str], gradients: bool) -> tuple[dict, dict]:
    """One gate stage: ``({system: verdict}, graph description)``.

    When the check cannot run at full size (OOM, TIMEOUT) it is retried on the
    quick size, whose schema is the same; if it still cannot run, the systems
    are UNCHECKED.
    """
    res = {}
    for check_quick in ([False, True] if not s.quick else [True]):
        cfg = task_config(s, model, dataset, systems=systems, check_quick=check_quick, gradients=gradients)
        res = run_in_subprocess(worker.check_config, cfg, s.timeout_s, s.mem_cap_bytes)
        if res["status"] == "ok":
            at = "quick size" if check_quick and not s.quick else "run size"
            verdicts = {name: {**v, "checked_at": at} for name, v in res.pop("verdicts").items()}
            described = {k: v for k, v in res.items() if k != "status"} if at == "run size" else {}
            return verdicts, described
    detail = f"the check could not run: {res['status']}: {res.get('error', '')}"
    return {name: {"status": "UNCHECKED", "detail": detail} for name in systems}, {}


def gate(s: Settings, model: str, dataset: str, systems: list[str]) -> tuple[dict, dict]:
    """``({mode: {system: verdict}}, graph description)`` for the non-eager ``systems`` of one pair.

    Inference rows need equal outputs; training rows also equal input
    gradients (a second, costlier stage, run only for systems that passed
    the first). A PyG pairing marked 'differs' is not checked (DIFFERS).
    """
    verdicts = {mode: {} for mode in s.modes}
    to_check = []
    for name in systems:
        if name == REFERENCE:
            continue
        pairing = SYSTEMS[name].pairing(model)
        if pairing is not None and pairing.differs:
            for mode in s.modes:
                verdicts[mode][name] = {"status": "DIFFERS", "detail": pairing.differs}
        else:
            to_check.append(name)
    failed, described = {}, {}
    for mode in s.modes:
        verdicts[mode].update(failed)
        pending = [name for name in to_check if name not in failed]
        if not pending:
            continue
        found, here = _check(s, model, dataset, pending, gradients=mode == "training")
        described = described or here
        verdicts[mode].update(found)
        failed.update({name: v for name, v in found.items() if v["status"] != "ok"})
    return verdicts, described


def _floor_fields(model: str, mode: str, shape: dict | None, rates: dict, time_ms: float | None) -> dict:
    if not shape:
        return {}
    w = floor.work(model, mode, floor.Shape(**shape))
    floor_ms = 1e3 * floor.floor_seconds(w, rates)
    out = {"work_flops": w.flops, "work_bytes": w.bytes, "floor_ms": floor_ms}
    if time_ms is not None:
        out["x_floor"] = time_ms / floor_ms
    return out


def _write_profile(s: Settings, row: dict) -> None:
    """Move a timed row's profile table into ``<profile_dir>/<model>-<dataset>-<mode>-<system>.txt``."""
    table = row.pop("profile", None)
    if table is not None:
        folder = Path(s.profile_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{row['model']}-{row['dataset']}-{row['mode']}-{row['system']}.txt").write_text(table)


def plan(s: Settings) -> list[tuple[str, str, list[str]]]:
    """``(model, dataset, systems)`` in run order; models without any selected system are left out."""
    out = []
    for model in s.models:
        systems = [name for name in s.systems if SYSTEMS[name].supports(model)]
        if systems:
            out.extend((model, dataset, systems) for dataset in datasets_for(model, s.datasets))
    return out


class ResultsFile:
    """``{"runs": [run, ...]}`` in one JSON file; each run is appended, then rewritten as rows arrive."""

    def __init__(self, path: Path):
        self.path = path
        self.runs = []
        if path.exists():
            try:
                self.runs = json.loads(path.read_text())["runs"]
            except (ValueError, KeyError, TypeError) as err:
                raise SystemExit(f"gnnc bench: {path} is not a results file of this harness ({err}); "
                                 f"move it away or choose another --out") from None

    def append(self, run: dict) -> None:
        self.runs.append(run)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"runs": self.runs}, indent=1))
        os.replace(tmp, self.path)


def pairings(pairs) -> list[dict]:
    """How each PyG-style system computes each planned model's function (once per system and model)."""
    out = {}
    for model, _, systems in pairs:
        for name in systems:
            p = SYSTEMS[name].pairing(model)
            if p is not None:
                out[(name, model)] = {"system": name, "model": model, "layer": p.layer, "note": p.note,
                                      "differs": p.differs}
    return list(out.values())


def _row(s: Settings, model: str, dataset: str, mode: str, system: str, verdict: dict | None,
         described: dict, rates: dict) -> dict:
    """One configuration's row: timed in its own subprocess unless the gate stopped it."""
    row = {"model": model, "dataset": dataset, "mode": mode, "system": system}
    if verdict is not None:
        row["check"] = verdict
    if verdict is None or verdict["status"] in TIMED:
        cfg = task_config(s, model, dataset, system=system, mode=mode)
        row.update(run_in_subprocess(worker.time_config, cfg, s.timeout_s, s.mem_cap_bytes))
        _write_profile(s, row)
    else:
        row.update(status=verdict["status"], **described)
    shape = row.get("shape") or described.get("shape")
    row.update(_floor_fields(model, mode, shape, rates, row.get("time_ms")))
    return row


def run(s: Settings, results: ResultsFile, log=print) -> dict:
    """Run every configuration of ``s``; the run record (machine, rates, settings, rows) is appended to
    ``results`` and saved after every row."""
    validate(s)
    pairs = plan(s)
    total = sum(len(systems) for _, _, systems in pairs) * len(s.modes)
    log(f"measuring copy bandwidth and matmul rate; then {total} configurations")
    if s.threads:
        torch.set_num_threads(s.threads)
    rates = machine.measure_rates()
    record = {"started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "preset": "quick" if s.quick else "full", "settings": asdict(s),
              "machine": machine.machine_info(), "rates": rates, "pairings": pairings(pairs), "rows": []}
    results.append(record)
    for model, dataset, systems in pairs:
        verdicts, described = gate(s, model, dataset, systems)
        for mode in s.modes:
            for name in systems:
                row = _row(s, model, dataset, mode, name, verdicts[mode].get(name), described, rates)
                record["rows"].append(row)
                results.save()
                shown = f"{row['time_ms']:.2f} ms" if row["status"] == "ok" else row["status"]
                log(f"[{len(record['rows'])}/{total}] {model} {dataset} {mode} {name}: {shown}")
    return record
