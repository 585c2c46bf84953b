"""A benchmark run: the plan, one fresh subprocess per configuration, and the JSON results file.

Everything is timed on the run's device (``Settings.device``): on ``cuda``
each configuration moves graph, features and layers to the GPU, the clock
waits for the GPU's queued work and memory is torch's CUDA allocations
(``devices``); systems that cannot run there are listed in the run's
``not_run``, never timed on the CPU instead.

Every dataset is built once per run, in its own subprocess, and saved to a
scratch folder that the configurations load it from. Every (model, dataset)
pair is first gated: one subprocess runs the eager oracle and saves its
outputs (and input gradients). Then every (mode, system) configuration is
timed in its own subprocess, forked from a forkserver that has imported
torch, torch_geometric, gnnc and the compiler's lazily imported modules but
run nothing, so each configuration starts from the same clean state and its
peak memory is its own (on a GPU where a fork of it cannot use CUDA, each
configuration is spawned instead, and the report says so); after its timed
calls the same subprocess checks the system against the oracle, on the
parameters it started with. A
configuration that runs past the timeout is killed and recorded as TIMEOUT;
one that exceeds the memory cap (or is killed by the kernel) as OOM; a
mismatching or unverifiable system is recorded and its times are never
reported.
"""

from __future__ import annotations

import datetime
import functools
import json
import multiprocessing as mp
import os
import signal
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from . import devices, floor, machine, peer, profiling, worker
from .datasets import DATASETS, missing_files
from .models import MODELS, datasets_for
from .systems import REFERENCE, SYSTEMS

# Imported once by the forkserver, never in a configuration's time or peak memory. torch.export._trace is
# what torch.fx imports on gnnc.compile's first trace (about 0.2 s); gnnc.backend.cpu imports numba
# (skipped without it), gnnc.backend.triton imports triton (the compiled backend on CUDA; skipped without it);
# harness.jit_runtime starts numba's compiler.
FORKSERVER_PRELOAD = [
    "torch",
    "torch_geometric",
    "gnnc",
    "harness.worker",
    "torch.export._trace",
    "gnnc.backend.cpu",
    "gnnc.backend.triton",
    "harness.jit_runtime",
]
TIMED = ("ok", "DIFFERS")  # gate verdicts that let a system be timed
PROFILE_EXTRA_BYTES, PROFILE_PEAK_FACTOR = 4 * 2**30, 4  # a profile may add 4 GiB (records) + 4x the peak


@dataclass
class Settings:
    """Everything a run depends on (recorded in the JSON with its results)."""

    models: list[str]
    datasets: list[str]
    systems: list[str]
    modes: list[str] = field(default_factory=lambda: list(worker.MODES))
    device: str = "cpu"  # where graphs, features and layers live and what is timed ("cpu" or "cuda")
    quick: bool = False
    seed: int = 0
    warmup: int = 2
    runs: int = 10
    min_runs: int = 3
    budget_s: float = 60.0
    timeout_s: float = 600.0
    mem_cap_bytes: int | None = None  # per configuration: address space on cpu, torch's CUDA allocator on cuda
    data_root: str = ""
    scale: float | None = None
    threads: int | None = None  # torch threads per configuration (None: torch's default, all cores)
    profile_dir: str | None = None  # where --profile writes operator tables (None: no profiling)
    profile_calls: int = profiling.DEFAULT_CALLS  # calls profiled per configuration, after the timed ones
    command: str = ""
    scratch_dir: str | None = None  # the run's scratch folder (set by ``run``; inductor's cache goes there)

    @property
    def host_cap_bytes(self) -> int | None:
        """The address-space cap of every subprocess: ``mem_cap_bytes`` on cpu; none on cuda, where the
        driver reserves more virtual address space than any useful cap (CUDA would fail to start)."""
        return self.mem_cap_bytes if self.device == "cpu" else None


@functools.cache
def _context(device: str = "cpu"):
    """The multiprocessing context that starts configurations on ``device``: the forkserver, unless a process
    forked from it cannot use CUDA (then ``spawn``, and ``start_method`` says why). On an H200 (torch 2.11,
    torch_geometric 2.8) importing torch_geometric alone left every fork with "CUDA error: initialization
    error", with PYTORCH_NVML_BASED_CUDA_CHECK set or not."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    if device == "cuda":
        probe = _start(ctx, worker.use_cuda, None, 120.0, None)
        if probe["status"] != "ok":
            _SPAWNED_BECAUSE[device] = str(probe.get("error", probe["status"])).splitlines()[0]
            return mp.get_context("spawn")
    return ctx


_SPAWNED_BECAUSE: dict[str, str] = {}  # device -> why its configurations are spawned, not forked


def start_method(device: str) -> str:
    """How configurations on ``device`` start, in words (for the run's machine record)."""
    _context(device)
    why = _SPAWNED_BECAUSE.get(device)
    if why is None:
        return "forked from a forkserver holding the imports"
    return (
        f"spawned (each imports torch and gnnc itself): a process forked from the forkserver could not use CUDA ({why})"
    )


def run_in_subprocess(task, arg, timeout_s: float, mem_cap_bytes: int | None = None, device: str = "cpu") -> dict:
    """``task(arg)`` in a fresh subprocess (``worker.child_main``) started as ``device`` needs
    (``_context``); TIMEOUT / OOM / ERROR dicts on failure."""
    return _start(_context(device), task, arg, timeout_s, mem_cap_bytes)


def _start(ctx, task, arg, timeout_s: float, mem_cap_bytes: int | None) -> dict:
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
    """SystemExit naming the culprit for a device that cannot run here, unknown names, unavailable systems
    or missing real data."""
    why = devices.missing(s.device)
    if why:
        raise SystemExit(f"gnnc bench: {why}")
    if s.device != "cpu" and s.profile_dir:
        raise SystemExit(
            f"gnnc bench: --profile reads CPU operator times and caps the address space, so it "
            f"runs with --device cpu only; leave --profile out with --device {s.device}"
        )
    for kind, names, known in (
        ("model", s.models, MODELS),
        ("dataset", s.datasets, DATASETS),
        ("system", s.systems, SYSTEMS),
        ("mode", s.modes, worker.MODES),
    ):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SystemExit(f"gnnc bench: unknown {kind}(s) {unknown}; known: {', '.join(known)}")
    for name in s.systems:
        why = SYSTEMS[name].missing(s.device)
        if why:  # one line; a peer system's says which command builds its environment
            raise SystemExit(f"gnnc bench: system {name!r} cannot run here: {why}")
    if s.profile_calls < 1:
        raise SystemExit(f"gnnc bench: --profile-calls must be at least 1, got {s.profile_calls}")
    for name in s.datasets:
        missing = missing_files(name, Path(s.data_root))
        if missing:
            raise SystemExit(
                f"gnnc bench: dataset {name!r} needs {missing}; set GNNC_DATA (or --data-dir) "
                f"to the folder holding planetoid/ and kg/, or leave {name} out of --datasets"
            )


def task_config(s: Settings, model: str | None, dataset: str, size_quick: bool, **extra) -> dict:
    """The dict a worker task reads; ``size_quick``: the task's data is at the quick size (the quick scale,
    also in a run whose ``--scale`` sets the replicas' size: the gate's fallback oracle)."""
    scale = None if size_quick and not s.quick else s.scale
    return {
        "model": model,
        "dataset": dataset,
        "seed": s.seed,
        "data_root": s.data_root,
        "scale": scale,
        "size_quick": size_quick,
        "threads": s.threads,
        "warmup": s.warmup,
        "runs": s.runs,
        "min_runs": s.min_runs,
        "budget_s": s.budget_s,
        "profile_calls": s.profile_calls,
        "profile_rows": profiling.DEFAULT_ROWS,
        "scratch": s.scratch_dir,
        "device": s.device,
        "gpu_mem_cap_bytes": s.mem_cap_bytes if s.device != "cpu" else None,
        **extra,
    }


class Scratch:
    """A run's scratch folder: each dataset built once and saved, and each pair's eager oracle.

    A dataset is built in its own subprocess the first time a task needs it;
    if that fails, the tasks build it themselves (and fail or not on their
    own), so the cache can only save time, never change a result.
    """

    def __init__(self, s: Settings, folder: Path):
        self.s, self.folder = s, Path(folder)
        self.data_files: dict[tuple[str, bool], str | None] = {}
        self.peer_files: dict[tuple[str, str, bool], str | None] = {}
        self.peer_described: dict[tuple[str, str, bool], dict] = {}  # the graph's description, or the error

    def data_file(self, dataset: str, size_quick: bool) -> str | None:
        key = (dataset, size_quick)
        if key not in self.data_files:
            path = self.folder / f"data-{dataset}-{'quick' if size_quick else 'full'}.pt"
            cfg = task_config(self.s, None, dataset, size_quick, path=str(path))
            res = run_in_subprocess(worker.build_dataset, cfg, self.s.timeout_s, self.s.host_cap_bytes, self.s.device)
            self.data_files[key] = str(path) if res["status"] == "ok" else None
        return self.data_files[key]

    def task(self, model: str, dataset: str, size_quick: bool, **extra) -> dict:
        """``task_config`` with the saved dataset of that size."""
        return task_config(self.s, model, dataset, size_quick, data_file=self.data_file(dataset, size_quick), **extra)

    def oracle_file(self, model: str, dataset: str, size_quick: bool) -> str:
        return str(self.folder / f"oracle-{model}-{dataset}-{'quick' if size_quick else 'full'}.pt")

    def peer_file(self, model: str, dataset: str, size_quick: bool) -> str | None:
        """The case exported for the peer interpreter (``peer.export_case``), written once; None when the
        export failed (its error is then in ``peer_described``)."""
        key = (model, dataset, size_quick)
        if key not in self.peer_files:
            path = self.folder / f"peer-{model}-{dataset}-{'quick' if size_quick else 'full'}.npz"
            res = run_in_subprocess(
                worker.export_peer,
                self.task(model, dataset, size_quick, path=str(path)),
                self.s.timeout_s,
                self.s.host_cap_bytes,
                self.s.device,
            )
            self.peer_files[key] = str(path) if res["status"] == "ok" else None
            self.peer_described[key] = {k: v for k, v in res.items() if k != "status"} if res["status"] == "ok" else res
        return self.peer_files[key]


@dataclass
class Gate:
    """What the gate decided for one (model, dataset) before timing.

    ``verdicts[mode][system]``: verdicts known before timing (DIFFERS; the
    quick-size check; UNCHECKED when no oracle could run). Systems without
    one are checked in their timing subprocess against ``oracle_file``.
    """

    verdicts: dict
    oracle_file: str | None = None
    described: dict = field(default_factory=dict)


def _oracle(s: Settings, scratch: Scratch, model: str, dataset: str, size_quick: bool) -> tuple[dict, str]:
    path = scratch.oracle_file(model, dataset, size_quick)
    cfg = scratch.task(model, dataset, size_quick, modes=s.modes, oracle_file=path)
    return run_in_subprocess(worker.oracle_config, cfg, s.timeout_s, s.host_cap_bytes, s.device), path


def gate(s: Settings, scratch: Scratch, model: str, dataset: str, systems: list[str]) -> Gate:
    """The eager oracle of one pair for the non-eager ``systems``, computed once in its own subprocess.

    Each system is then checked in its own timing subprocess, right after
    its timed calls, on the parameters it started with. When the oracle
    cannot run at full size (OOM, TIMEOUT) it is computed at the quick size,
    whose schema is the same, and each system is checked there, one
    subprocess each, before any timing; if it still cannot run, the systems
    are UNCHECKED. A PyG pairing marked 'differs' is not checked (DIFFERS).
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
    if not to_check:
        return Gate(verdicts)
    res, path = _oracle(s, scratch, model, dataset, s.quick)
    if res["status"] == "ok":
        return Gate(verdicts, path, {k: v for k, v in res.items() if k != "status"})
    if not s.quick:
        res, path = _oracle(s, scratch, model, dataset, True)
        if res["status"] == "ok":
            for name in to_check:
                cfg = scratch.task(model, dataset, True, system=name, modes=s.modes, oracle_file=path)
                found = launch(s, scratch, worker.check_config, cfg)
                for mode in s.modes:
                    verdict = (
                        found["verdicts"][mode]
                        if found["status"] == "ok"
                        else {
                            "status": "UNCHECKED",
                            "detail": f"the check could not run: {found['status']}: {found.get('error', '')}",
                        }
                    )
                    verdicts[mode][name] = {**verdict, "checked_at": "quick size"}
            return Gate(verdicts)
    detail = f"the eager oracle could not run: {res['status']}: {res.get('error', '')}"
    for mode in s.modes:
        verdicts[mode].update({name: {"status": "UNCHECKED", "detail": detail} for name in to_check})
    return Gate(verdicts)


def _floor_fields(model: str, mode: str, shape: dict | None, rates: dict, time_ms: float | None) -> dict:
    if not shape:
        return {}
    w = floor.work(model, mode, floor.Shape(**shape))
    floor_ms = 1e3 * floor.floor_seconds(w, rates)
    out = {"work_flops": w.flops, "work_bytes": w.bytes, "floor_ms": floor_ms}
    if time_ms is not None:
        out["x_floor"] = time_ms / floor_ms
    return out


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
                raise SystemExit(
                    f"gnnc bench: {path} is not a results file of this harness ({err}); "
                    f"move it away or choose another --out"
                ) from None

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
                out[(name, model)] = {
                    "system": name,
                    "model": model,
                    "layer": p.layer,
                    "note": p.note,
                    "differs": p.differs,
                }
    return list(out.values())


# dropped when the check after the timed calls fails
UNTIMED_FIELDS = ("time_ms", "times_ms", "first_call_ms", "peak_mib", "steady_peak_mib", "retained_mib")


def launch(s: Settings, scratch: Scratch, task, cfg: dict) -> dict:
    """``task`` (``worker.time_config`` or ``worker.check_config``) on ``cfg`` in a fresh subprocess: a
    harness one, or for a peer system the peer interpreter, whose outputs a harness subprocess then
    judges against the oracle (``worker.peer_verdict``), so the gate is the same on both paths."""
    if not SYSTEMS[cfg["system"]].peer:
        return run_in_subprocess(task, cfg, s.timeout_s, s.host_cap_bytes, s.device)
    timed = task is worker.time_config
    key = (cfg["model"], cfg["dataset"], cfg["size_quick"])
    peer_file = scratch.peer_file(*key)
    if peer_file is None:
        found = scratch.peer_described[key]
        return {"status": found["status"], "error": f"exporting the case for the peer: {found.get('error', '')}"}
    check_modes = ([cfg["mode"]] if cfg.get("oracle_file") else []) if timed else list(cfg["modes"])
    outputs = (
        str(
            scratch.folder / f"outputs-{cfg['system']}-{cfg['model']}-{cfg['dataset']}-{cfg.get('mode') or 'check'}.npz"
        )
        if check_modes
        else None
    )
    run = {
        **cfg,
        "peer_file": peer_file,
        "mode": cfg.get("mode") if timed else None,
        "outputs_file": outputs,
        "check_modes": check_modes,
    }
    res = {**scratch.peer_described[key], **peer.run_config(run, s.timeout_s, s.host_cap_bytes, scratch.folder)}
    if res["status"] != "ok" or outputs is None:
        return res
    judged = run_in_subprocess(
        worker.peer_verdict,
        {**cfg, "outputs_file": outputs, "modes": check_modes},
        s.timeout_s,
        s.host_cap_bytes,
        s.device,
    )
    if judged["status"] != "ok":
        verdicts = {
            m: {"status": judged["status"], "detail": f"the check could not run: {judged.get('error', '')}"}
            for m in check_modes
        }
    else:
        verdicts = judged["verdicts"]
    if timed:
        res["check"] = verdicts[cfg["mode"]]
        return res
    return {"status": "ok", "verdicts": verdicts}


def _timed(
    s: Settings, scratch: Scratch, model: str, dataset: str, mode: str, system: str, oracle_file: str | None
) -> dict:
    """One configuration timed in its own subprocess (and checked there when ``oracle_file`` is given).

    A failed check turns the row into that failure: its times are dropped,
    never reported.
    """
    cfg = scratch.task(model, dataset, s.quick, system=system, mode=mode, oracle_file=oracle_file)
    row = launch(s, scratch, worker.time_config, cfg)
    verdict = row.get("check")
    if verdict is not None:
        verdict["checked_at"] = "run size"
        if verdict["status"] != "ok":
            for key in UNTIMED_FIELDS:
                row.pop(key, None)
            row["status"] = verdict["status"]
    return row


def _profile(s: Settings, scratch: Scratch, row: dict) -> dict:
    """``worker.profile_config`` of a timed row, in a subprocess of its own.

    The profiled calls get a few times the row's peak memory. The profiler's
    records can fragment the heap until a step with many large temporaries
    (PyG's HGTConv backward) grows without bound; such a profile (OOM) is
    taken again with every large allocation mmapped, which bounds its memory
    but makes memory-touching operators dearer (the file says so).
    """
    extra = PROFILE_EXTRA_BYTES + PROFILE_PEAK_FACTOR * int(row["peak_mib"] * 2**20)
    res = {}
    for fixed_mmap in (False, True):
        cfg = scratch.task(
            row["model"],
            row["dataset"],
            s.quick,
            system=row["system"],
            mode=row["mode"],
            fixed_mmap=fixed_mmap,
            profile_extra_bytes=extra,
        )
        res = run_in_subprocess(worker.profile_config, cfg, s.timeout_s, s.host_cap_bytes, s.device)
        if res["status"] != "OOM":
            break
    return res


def _row(
    s: Settings,
    scratch: Scratch,
    model: str,
    dataset: str,
    mode: str,
    system: str,
    g: Gate,
    rates: dict,
    profiles: profiling.ProfileFiles | None,
) -> dict:
    """One configuration's row: timed in its own subprocess unless the gate stopped it."""
    row = {"model": model, "dataset": dataset, "mode": mode, "system": system}
    verdict = g.verdicts[mode].get(system)
    if verdict is not None and verdict["status"] not in TIMED:
        row.update(status=verdict["status"], check=verdict, **g.described)
    else:
        checked_here = verdict is None and system != REFERENCE
        if verdict is not None:
            row["check"] = verdict
        row.update(_timed(s, scratch, model, dataset, mode, system, g.oracle_file if checked_here else None))
        if row["status"] == "ok" and profiles is not None and not SYSTEMS[system].peer:  # no peer profiles yet
            profiles.add(row, _profile(s, scratch, row))
    shape = row.get("shape") or g.described.get("shape")
    row.update(_floor_fields(model, mode, shape, rates, row.get("time_ms")))
    return row


def not_run(s: Settings) -> dict[str, str]:
    """Why each registered system left out of ``s.systems`` cannot run on ``s.device`` here (those that
    could run but were not asked for are not listed)."""
    return {
        name: why
        for name, system in SYSTEMS.items()
        if name not in s.systems and (why := system.missing(s.device)) is not None
    }


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _key(row: dict) -> tuple[str, str, str, str]:
    return row["model"], row["dataset"], row["mode"], row["system"]


# Settings a resumed run may change: they name where and how it was started, not what it measures.
RESUME_FREE_SETTINGS = ("command", "scratch_dir", "mem_cap_bytes")


def resume_refusal(previous: dict, s: Settings) -> str | None:
    """Why the run record ``previous`` cannot be continued under ``s`` (None when it can): its settings
    (but ``RESUME_FREE_SETTINGS``), gnnc's source and the peer environment must be the ones it measured."""
    old = {k: v for k, v in previous["settings"].items() if k not in RESUME_FREE_SETTINGS}
    new = {k: v for k, v in json.loads(json.dumps(asdict(s))).items() if k not in RESUME_FREE_SETTINGS}
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if changed:
        return "its settings differ: " + "; ".join(f"{k} was {old.get(k)!r}, now {new.get(k)!r}" for k in changed)
    source = previous["machine"].get("gnnc_source")
    if source is None:
        return "it records no digest of gnnc's source (a run from before --resume existed)"
    if source != machine.gnnc_source_digest():
        return "gnnc's source differs from the one it measured"
    if any(SYSTEMS[name].peer for name in s.systems) and previous["machine"].get("peer") != peer.stamp():
        return f"the peer environment differs: {previous['machine'].get('peer')} then, {peer.stamp()} now"
    return None


def _resumed(s: Settings, results: ResultsFile) -> dict:
    """The last run of ``results``, stamped as resumed now; SystemExit saying why when it cannot be."""
    if not results.runs:
        raise SystemExit(f"gnnc bench: --resume: {results.path} holds no run to resume")
    record = results.runs[-1]
    why = resume_refusal(record, s)
    if why:
        raise SystemExit(
            f"gnnc bench: --resume: the last run in {results.path} (started {record['started']}) "
            f"cannot be resumed: {why}. Leave --resume out to start a new run"
        )
    record.setdefault("resumed", []).append({"at": _now(), "command": s.command, "git_commit": machine.git_commit()})
    results.save()
    return record


def run(s: Settings, results: ResultsFile, log=print, on_row=None, resume: bool = False) -> dict:
    """Run every configuration of ``s``; the run record (machine, rates, settings, rows) is appended to
    ``results`` and saved after every row, and then handed to ``on_row`` (when given).

    ``resume``: continue the last run of ``results`` instead (``resume_refusal`` says when it cannot be):
    configurations with a row keep it, the others run now, under the rates measured at its start.
    """
    validate(s)
    pairs = plan(s)
    total = sum(len(systems) for _, _, systems in pairs) * len(s.modes)
    if s.threads:
        torch.set_num_threads(s.threads)
    if resume:
        record = _resumed(s, results)
        rates = record["rates"]
        log(f"resuming the run started {record['started']}: {len(record['rows'])} of {total} configurations done")
    else:
        log(f"measuring copy bandwidth and matmul rate; then {total} configurations")
        rates = machine.measure_rates(s.device)
        record = {
            "started": _now(),
            "preset": "quick" if s.quick else "full",
            "settings": asdict(s),
            "machine": {**machine.machine_info(s.device), "configurations": start_method(s.device)},
            "rates": rates,
            "pairings": pairings(pairs),
            "systems": {
                name: {
                    "description": SYSTEMS[name].description,
                    "peer": SYSTEMS[name].peer,
                    "compiles": SYSTEMS[name].compiles,
                }
                for name in s.systems
            },
            "not_run": not_run(s),
            "rows": [],
        }
        if any(SYSTEMS[name].peer for name in s.systems):
            record["machine"]["peer"] = peer.stamp()
        results.append(record)
    done = {_key(row) for row in record["rows"]}
    profiles = profiling.ProfileFiles(Path(s.profile_dir)) if s.profile_dir else None
    with tempfile.TemporaryDirectory(prefix="gnnc-bench-") as folder:
        s.scratch_dir = folder
        scratch = Scratch(s, Path(folder))
        for model, dataset, systems in pairs:
            todo = [(mode, name) for mode in s.modes for name in systems if (model, dataset, mode, name) not in done]
            if not todo:
                continue
            log(f"{model} on {dataset}: building the data and the eager oracle")
            pending = {name for _, name in todo}
            g = gate(s, scratch, model, dataset, [name for name in systems if name in pending])
            for mode, name in todo:
                row = _row(s, scratch, model, dataset, mode, name, g, rates, profiles)
                record["rows"].append(row)
                results.save()
                if on_row is not None:
                    on_row(record)
                shown = f"{row['time_ms']:.2f} ms" if row["status"] == "ok" else row["status"]
                log(f"[{len(record['rows'])}/{total}] {model} {dataset} {mode} {name}: {shown}")
    return record
