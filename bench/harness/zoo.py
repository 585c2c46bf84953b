"""The zoo: real layers from the world's model code, timed against DGL running the same code and against the
library modules that compute the same function (``gnnc bench --zoo``).

Each row is a ``world_programs`` program (a layer file from ``--world-code``, unchanged, through gnnc's DGL
alias) and its ``zoo_peers`` (DGL 2.1's ``dgl.nn`` module or PyG's, configured to compute the same function,
parameters copied in). First the gate (``world_gate``): every system trains two SGD steps in float64 on a
small random graph and its outputs, input gradients and parameter gradients are compared with DGL running
the same code; a system is timed only when it matches (gnnc compiled also when it fell back: its row says
why). Then the timing (``zoo_worker``), each system in its own process, in float32 on a pubmed-size
power-law graph (the ``pubmed`` replica of ``gnnc.data.synthetic``): inference and one training step,
median of ``--runs`` after ``--warmup`` warm-ups, ``--threads`` threads, the resident set's high-water mark.

Both graphs get a self loop on every node without in-edges: on an empty neighbourhood the programs' Python
reduce functions are not called (the node keeps what it had) where built-ins write their formula's value
(GatedGCNConv: ``Ah``), so without it a built-in would compute another function on those nodes.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from gnnc import progress

from . import machine, peer, world_gate, zoo_peers
from .world_programs import BY_NAME, D, N, edges

ZOO = [  # at least 12 layers from at least 5 projects (``Program.project``)
    "gatedgcn",
    "gat-edge-repr",
    "sage-maxpool",
    "gin-plain",
    "monet",
    "graph-transformer",
    "graph-transformer-edge",
    "pna",
    "attentivefp",
    "deepergcn-genconv",
    "compgcn-sub",
    "proteins-gat",
    "grand",
    "arma",
    "dagnn",
]
GATED = ("gnnc", "dgl", "gnnc-compiled")  # eager first: it writes the parameters the others load
TIMED = ("gnnc", "dgl", "gnnc-compiled", *zoo_peers.SYSTEMS)  # eager first again, for the timing's parameters
MODES = ("inference", "training")
COLUMNS = ("gnnc-compiled", "gnnc", "dgl", *zoo_peers.SYSTEMS)  # the order of the milliseconds table
WIDTH = 64
GRAPH = "pubmed"  # the replica the timing runs on
RTOL, ATOL = 1e-6, 1e-9
SEED = 0


def fill_empty_neighbourhoods(src: np.ndarray, dst: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges plus a self loop on every node without in-edges."""
    empty = np.flatnonzero(np.bincount(dst, minlength=nodes) == 0)
    return np.concatenate([src, empty]), np.concatenate([dst, empty])


def write_graph(path: Path, src, dst, nodes: int, width: int) -> Path:
    """The ``.npz`` ``world_programs.load_shape`` reads."""
    src, dst = fill_empty_neighbourhoods(np.asarray(src, np.int64), np.asarray(dst, np.int64), nodes)
    np.savez(path, src=src, dst=dst, nodes=nodes, width=width)
    return path


def gate_graph(path: Path) -> Path:
    """The small random test graph (multi-edges, self loops), its empty neighbourhoods filled, at ``path``."""
    src, dst = edges(np.random.RandomState(SEED))
    return write_graph(path, src.numpy(), dst.numpy(), N, D)


def timing_graph(folder: Path) -> tuple[Path, dict]:
    """The ``GRAPH`` replica's edges, empty neighbourhoods filled, ``WIDTH`` wide; and what it is."""
    from gnnc.data import synthetic

    g = synthetic(GRAPH, seed=SEED, with_features=False).graph
    src, dst = (t.numpy() for t in g.edges())
    path = write_graph(folder / "timing-graph.npz", src, dst, g.num_nodes(), WIDTH)
    filled = int(np.load(path)["src"].size - src.size)
    return path, {"replica": GRAPH, "nodes": g.num_nodes(), "edges": int(src.size), "self_loops_added": filled}


def gate(name: str, world_code: Path, folder: Path, timeout: float) -> dict:
    """Each system's verdict against DGL running the same code on the gate graph, and the compiled run's
    plans and fallbacks."""
    program = BY_NAME[name]
    graph = gate_graph(folder / f"{name}.gate-graph.npz")  # one per row: rows run side by side
    rtol, atol = world_gate.tolerances(program, RTOL, ATOL)
    systems = [*GATED, *(s for s in zoo_peers.SYSTEMS if (name, s) in zoo_peers.BY_PROGRAM_SYSTEM)]
    runs = {s: world_gate.run(s, name, world_code, folder, timeout, graph) for s in systems}
    verdicts = {s: world_gate.verdict(runs[s], runs["dgl"], rtol, atol) for s in systems if s != "dgl"}
    verdicts["dgl"] = "ok" if runs["dgl"]["status"] == "ok" else f"error: {runs['dgl']['error']}"
    compiled = runs["gnnc-compiled"]
    return {
        "verdicts": verdicts,
        "compiled_plans": compiled.get("compiled_plans", 0),
        "fallbacks": compiled.get("fallbacks", []),
        "tolerances": [rtol, atol],
    }


def timed(system: str, name: str, cfg: dict, folder: Path, timeout: float) -> dict:
    """One ``zoo_worker`` process; its result, or why there is none."""
    result_file = folder / f"{name}.{system}.timing.json"
    cfg_file = folder / f"{name}.{system}.cfg.json"
    cfg_file.write_text(json.dumps({**cfg, "system": system, "program": name, "result_file": str(result_file)}))
    log_file = folder / f"{name}.{system}.log"
    command = [world_gate.python_for(system), "-m", "harness.zoo_worker", str(cfg_file)]
    returncode = peer.launch(command, world_gate.worker_env(cfg["threads"]), log_file, timeout)
    if returncode is None:
        return {"status": "TIMEOUT", "error": f"no result within {timeout:g} s"}
    if result_file.exists():
        return json.loads(result_file.read_text())
    tail = log_file.read_text()[-400:].strip().replace("\n", " | ")
    return {"status": "ERROR", "error": f"worker exited with code {returncode}: {tail}"}


def to_time(name: str, verdicts: dict) -> list[str]:
    """The systems the gate lets through: eager and the peers when they match DGL running the same code (the
    oracle, which is timed whenever it ran), compiled when it matched, fallen back or not."""
    if verdicts["dgl"] != "ok" or verdicts["gnnc"] != "match":
        return []
    return [s for s in TIMED if s == "dgl" or verdicts.get(s, "").startswith("match")]


def row(name: str, world_code: Path, folder: Path, cfg: dict, timeout: float, log) -> dict:
    program = BY_NAME[name]
    gated = gate(name, world_code, folder, timeout)
    cfg = {**cfg, "state": str(folder / f"{name}.timing-state.npz")}
    timings = {s: timed(s, name, cfg, folder, timeout) for s in to_time(name, gated["verdicts"])}
    peers = {s: p.label for (n, s), p in zoo_peers.BY_PROGRAM_SYSTEM.items() if n == name}
    result = {"program": name, "project": program.project, "file": program.file, "peers": peers, **gated}
    result["timings"] = timings
    log(f"{name:24} " + "  ".join(f"{s}: {cell(timings.get(s), 'training')}" for s in TIMED))
    return result


def cell(timing: dict | None, mode: str) -> str:
    if timing is None:
        return "-"
    if timing.get("status") != "ok":
        return timing.get("status", "?")
    return f"{timing[mode]['time_ms']:.1f} ms"


def ratio(r: dict, system: str, mode: str) -> str:
    """gnnc compiled's median over ``system``'s, or why there is none."""
    ours, theirs = r["timings"].get("gnnc-compiled"), r["timings"].get(system)
    if ours is None or theirs is None or ours.get("status") != "ok" or theirs.get("status") != "ok":
        return "-"
    return f"{ours[mode]['time_ms'] / theirs[mode]['time_ms']:.2f}x"


def peer_cell(r: dict, system: str) -> str:
    """Compiled over the peer (fwd / train) and the peer's name; "no built-in" / "none" where there is none,
    and the gate's verdict where it did not match."""
    if system not in r["peers"]:
        return "no built-in" if system == "dgl-builtin" else "none"
    verdict = r["verdicts"].get(system, "")
    label = r["peers"][system]
    if not verdict.startswith("match"):
        return f"{label}: not timed ({verdict})"
    return f"{ratio(r, system, 'inference')} / {ratio(r, system, 'training')} ({label})"


def path_cell(r: dict) -> str:
    """lowered, or fell back with the warnings' text (the gate's run and the timed one), or what the gate
    said."""
    timed_run = r["timings"].get("gnnc-compiled") or {}
    fallbacks = sorted({*r["fallbacks"], *timed_run.get("fallbacks", [])})
    if fallbacks:
        return "**fell back**: " + "; ".join(fallbacks)
    if r["verdicts"]["gnnc-compiled"] != "match":
        return f"gate: {r['verdicts']['gnnc-compiled']}"
    if not r["compiled_plans"] or timed_run.get("compiled_plans") == 0:
        return "no compiled plan ran"
    return "lowered"


def ms_cell(r: dict, system: str) -> str:
    t = r["timings"].get(system)
    if t is None:
        return "-" if r["verdicts"].get(system, "ok") in ("ok", "match") else "not timed"
    if t.get("status") != "ok":
        return f"{t['status']}: {t.get('error', '')[:80]}"
    return f"{t['inference']['time_ms']:.1f} / {t['training']['time_ms']:.1f}"


def peak_cell(r: dict) -> str:
    def peak(s):
        t = r["timings"].get(s)
        return f"{t['training']['peak_mib']:.0f}" if t and t.get("status") == "ok" else "-"

    return " / ".join(peak(s) for s in COLUMNS)


def table(record: dict) -> str:
    rows = record["rows"]
    lines = [
        "| layer | project | compiled / DGL same code: fwd / train | compiled / dgl.nn built-in: fwd / train | "
        "compiled / PyG: fwd / train | path |",
        "|---|---|--:|--:|--:|---|",
    ]
    for r in rows:
        cells = [
            r["program"],
            r["project"],
            f"{ratio(r, 'dgl', 'inference')} / {ratio(r, 'dgl', 'training')}",
            peer_cell(r, "dgl-builtin"),
            peer_cell(r, "pyg"),
            path_cell(r),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    names = " / ".join(COLUMNS)
    lines += [
        "",
        f"Median milliseconds, fwd / train, and the training step's peak (MiB; {names}):",
        "",
        "| layer | gnnc compiled | gnnc eager | DGL same code | dgl.nn built-in | PyG | gate | peak MiB |",
        "|---|--:|--:|--:|--:|--:|---|--:|",
    ]
    for r in rows:
        gate_cell = "; ".join(f"{s}: {v}" for s, v in r["verdicts"].items() if v not in ("ok", "match"))
        cells = [r["program"], *(ms_cell(r, s) for s in COLUMNS), gate_cell or "all match", peak_cell(r)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(record: dict) -> str:
    g, m, s = record["graph"], record["machine"], record["settings"]
    return (
        f"# The zoo: the world's layers, gnnc compiled against DGL 2.1 and the same function's built-ins, at "
        f"{m.get('git_commit')}\n\n    {record['command']}\n\n"
        f"Layer files from `../shared/world-code`, unchanged, through gnnc's DGL alias. Timed on the "
        f"`{g['replica']}` replica ({g['nodes']:,} nodes, {g['edges']:,} power-law edges, plus "
        f"{g['self_loops_added']:,} self loops on the nodes without in-edges), features {s['width']} wide, "
        f"float32, {s['threads']} threads, median of {s['runs']} after {s['warmup']} warm-ups; each system "
        f"in its own process, {s['jobs']} rows at a time. fwd: inference (eval, no grad); train: forward, "
        f"sum loss, backward, SGD step. "
        f"Below 1x gnnc compiled is faster. Every system was first gated: two SGD steps in float64 on a small "
        f"random graph, outputs, input and parameter gradients against DGL running the same code (rtol "
        f"{RTOL:g}, atol {ATOL:g}; float32 layers rtol {world_gate.FLOAT32_TOLERANCES[0]:g}, atol "
        f"{world_gate.FLOAT32_TOLERANCES[1]:g}); only what matched was timed. A built-in or PyG cell is a "
        f"module configured to compute the layer's function, parameters copied in (`bench/harness/"
        f'zoo_peers.py`); "no built-in" means none computes it, and the row compares with DGL running the '
        f"same code. PyG {m.get('torch_geometric')} without pyg-lib (not on the package index: its "
        f"`segment_matmul` path is unavailable), torch-scatter or torch-sparse "
        f"({m.get('pyg_extensions')}).\n\n"
        f"Machine: {m['cpu']}, {m['cores']} cores, load average {record['load_average']} at the start and "
        f"{record.get('load_average_end', '-')} at the end (a machine shared with other jobs); torch "
        f"{m['torch']}, numba {m['numba']}; DGL "
        f"{(record.get('peer') or {}).get('dgl')} on torch {(record.get('peer') or {}).get('torch')}; "
        f"{record['seconds']} s.\n\n" + table(record)
    )


def run(args, command: str) -> int:
    """``gnnc bench --zoo``: gate and time ``--layers`` (default ``ZOO``); write ``results.json`` and
    ``README.md`` to ``--out`` (default ``bench/results/zoo/<commit>``)."""
    missing = peer.missing()
    if missing:
        raise SystemExit(f"gnnc bench --zoo needs DGL 2.1 as the oracle and a peer: {missing}")
    names = args.layers or ZOO
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"gnnc bench --zoo: unknown layers {unknown}; choose from {sorted(BY_NAME)}")
    world_code = (args.world_code or world_gate.BENCH.parents[1] / "shared" / "world-code").resolve()
    out = args.out or world_gate.BENCH / "results" / "zoo" / (machine.git_commit() or "unversioned")
    settings = {
        "threads": args.threads or 2,
        "runs": args.runs or 5,
        "warmup": args.warmup or 2,
        "jobs": args.jobs or 1,
        "width": WIDTH,
        "timeout_s": args.timeout or 3600.0,
    }
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    started = time.perf_counter()
    log = progress.line
    record = {
        "command": command,
        "settings": settings,
        "machine": {**machine.machine_info(), "torch_threads": settings["threads"], "node": platform.node()},
        "peer": peer.stamp(),
        "load_average": load,
        "rows": [],
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        graph, record["graph"] = timing_graph(folder)
        cfg = {
            "world_code": str(world_code),
            "graph": str(graph),
            "modes": list(MODES),
            "threads": settings["threads"],
            # timing.timed_calls makes its warm-up calls twice, before and after it settles the memory
            "warmup": (settings["warmup"] + 1) // 2,
            "runs": settings["runs"],
            "min_runs": settings["runs"],
            "budget_s": 0.0,  # stop at --runs: min_runs is --runs too
        }
        done = threading.Lock()

        def one(name):  # the files are rewritten after every row: a stopped run leaves its rows
            result = row(name, world_code, folder, cfg, settings["timeout_s"], log)
            with done:
                record["rows"] = sorted([*record["rows"], result], key=lambda r: names.index(r["program"]))
                record["seconds"] = round(time.perf_counter() - started)
                record["load_average_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
                (out / "results.json").write_text(json.dumps(record, indent=1))
                (out / "README.md").write_text(markdown(record))

        with ThreadPoolExecutor(settings["jobs"]) as pool:
            list(pool.map(one, names))
    print(table(record))
    log(f"results in {out}")
    return 0
