"""The Markdown report of one run: machine, datasets, then one table per mode."""

from __future__ import annotations

import statistics

from . import torch_logs
from .datasets import DATASETS
from .models import MODELS
from .systems import REFERENCE, SYSTEMS

GNNC = "compiled"

MODE_TITLES = {
    "inference": "Inference (one layer forward)",
    "training": "Training step (forward, backward, SGD update)",
}


def _num(x: float) -> str:
    """Three significant digits, no exponent for everyday magnitudes."""
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def best_other_ms(rows: list[dict], row: dict) -> float | None:
    """Fastest successful time of the other systems on the same model, dataset and mode."""
    times = [
        r["time_ms"]
        for r in rows
        if r["status"] == "ok"
        and r["system"] != row["system"]
        and (r["model"], r["dataset"], r["mode"]) == (row["model"], row["dataset"], row["mode"])
    ]
    return min(times) if times else None


def _check_cell(row: dict) -> str:
    if row["system"] == REFERENCE:
        return "oracle"
    check = row.get("check")
    if check is None:
        return ""
    if check["status"] == "DIFFERS":
        return f"differs: {check['detail']}"
    if check["status"] == "ok":
        at = " (at quick size)" if check.get("checked_at") == "quick size" else ""
        if "jitter_seed" in check:  # gradients agreed only at a further jitter point: say why
            at += f" ({check['detail']})"
        return f"ok, err {max(check['output_err'], check.get('grad_err', 0.0)):.2g} of tol{at}"
    return f"{check['status']}: {check.get('detail') or check.get('error', '')}"


def _status_cell(row: dict) -> str:
    if row["status"] == "ok":
        return _num(row["time_ms"])
    return f"**{row['status']}**"


def mode_table(rows: list[dict], mode: str) -> list[str]:
    lines = [
        "| model | dataset | system | time (ms) | vs best other | peak (MiB) | steady peak (MiB) | x floor | check |",
        "|---|---|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in (r for r in rows if r["mode"] == mode):
        best = best_other_ms(rows, r) if r["status"] == "ok" else None
        ratio = f"{r['time_ms'] / best:.2f}x" if best else ""
        peak = _num(r["peak_mib"]) if r["status"] == "ok" else ""
        steady = _num(r["steady_peak_mib"]) if r["status"] == "ok" and "steady_peak_mib" in r else ""
        x_floor = _num(r["x_floor"]) if "x_floor" in r else ""
        lines.append(
            f"| {MODELS[r['model']].title} | {r['dataset']} | {r['system']} | {_status_cell(r)} | "
            f"{ratio} | {peak} | {steady} | {x_floor} | {_check_cell(r)} |"
        )
    return lines


def _peer(system: str, model: str) -> bool:
    return system in SYSTEMS and SYSTEMS[system].pairing(model) is not None


def summary_table(rows: list[dict], modes) -> list[str]:
    """Per model and mode, over the datasets where ``compiled`` and some peer (PyG, DGL) both ran and
    matched eager: the median of compiled's time over the fastest peer's and of its peak over the
    leanest peer's, and the datasets where a peer is faster."""

    def ok(r):
        return r["status"] == "ok" and (r.get("check") or {}).get("status", "ok") == "ok"

    lines = [
        "| model | mode | datasets | time / fastest peer (median) | peak / leanest peer (median) "
        "| where a peer is faster |",
        "|---|---|--:|--:|--:|---|",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        for mode in modes:
            times, peaks, behind = [], [], []
            for ours in (r for r in rows if (r["model"], r["mode"], r["system"]) == (model, mode, GNNC) and ok(r)):
                peers = [
                    r
                    for r in rows
                    if (r["model"], r["dataset"], r["mode"]) == (model, ours["dataset"], mode)
                    and _peer(r["system"], model)
                    and ok(r)
                ]
                if not peers:
                    continue
                fastest = min(peers, key=lambda r: r["time_ms"])
                times.append(ours["time_ms"] / fastest["time_ms"])
                peaks.append(ours["peak_mib"] / max(min(r["peak_mib"] for r in peers), 1e-9))
                if times[-1] > 1:
                    behind.append(f"{ours['dataset']} ({fastest['system']}, {times[-1]:.2f}x)")
            if times:
                lines.append(
                    f"| {MODELS[model].title} | {mode} | {len(times)} | {statistics.median(times):.2f}x | "
                    f"{statistics.median(peaks):.2f}x | {', '.join(behind) or 'none'} |"
                )
    return lines


def dataset_table(rows: list[dict]) -> list[str]:
    lines = [
        "| dataset | source | size | nodes | edges | relations | node types | input width |",
        "|---|---|---|--:|--:|--:|--:|--:|",
    ]
    seen = set()
    for r in rows:
        if r["dataset"] in seen or "nodes" not in r:
            continue
        seen.add(r["dataset"])
        lines.append(
            f"| {r['dataset']} | {DATASETS[r['dataset']].source} | {r['size']} | {r['nodes']:,} | "
            f"{r['edges']:,} | {r['relations']} | {r['node_types']} | {r['in_dim']} |"
        )
    return lines


def first_calls(record: dict) -> list[str]:
    """The first call of each system that compiles on it (compile + one call), beside its steady time."""
    compiling = {name for name, info in record.get("systems", {}).items() if info.get("compiles")}
    lines = []
    for r in record["rows"]:
        if r["system"] in compiling and r["status"] == "ok" and r.get("first_call_ms") is not None:
            lines.append(
                f"| {MODELS[r['model']].title} | {r['dataset']} | {r['mode']} | {r['system']} | "
                f"{_num(r['first_call_ms'])} | {_num(r['time_ms'])} |"
            )
    if not lines:
        return []
    return ["| model | dataset | mode | system | first call (ms) | steady (ms) |", "|---|---|---|---|--:|--:|", *lines]


def errors(rows: list[dict]) -> list[str]:
    return [
        f"- {r['model']} {r['dataset']} {r['mode']} {r['system']}: {r['status']}: {r['error']}"
        for r in rows
        if r["status"] != "ok" and r.get("error")
    ]


def _gpu(m: dict) -> str:
    """The GPU of a cuda run's machine record, named; empty for a CPU run."""
    if m.get("device", "cpu") == "cpu":
        return ""
    return (
        f"GPU {m['gpu']} ({m['gpu_memory_gib']:.0f} GiB, CUDA {m['cuda']}, "
        f"triton {m.get('triton') or 'absent'}), `compiled` on gnnc's {m['compiled_backend']} backend; "
    )


SYNCED = " (the GPU's queued work waited for before every clock reading)"
PEAK = {  # what *peak* and *steady peak* measure, per device
    "cpu": (
        "the resident high-water mark above the resident set before the first call, library code pages "
        "mapped beforehand",
        "the resident set",
    ),
    "cuda": (
        "torch.cuda.max_memory_allocated (reset before the first call) above the memory allocated "
        "before it; host memory is not counted",
        "the memory allocated",
    ),
}


def markdown(record: dict) -> str:
    """The report of one run record (as ``runner.run`` returns and the JSON file keeps)."""
    m, rates, rows = record["machine"], record["rates"], record["rows"]
    commit = (m["git_commit"] or "unknown")[:12]
    device = m.get("device", "cpu")
    peak, in_use = PEAK[device]
    out = [
        f"# gnnc benchmark ({record['preset']}{'' if device == 'cpu' else ', ' + m['gpu']})",
        "",
        f"`{record['settings']['command']}` — started {record['started']}"
        + "".join(
            f"; resumed {part['at']} (`{part['command']}`, commit {(part['git_commit'] or 'unknown')[:12]})"
            for part in record.get("resumed", [])
        ),
        "",
        f"Machine: {_gpu(m)}{m['cpu']}, {m['cores']} cores, torch threads {m['torch_threads']}; "
        f"torch {m['torch']}, gnnc {m['gnnc']}, torch_geometric {m['torch_geometric']}, "
        f"numba {m.get('numba') or 'absent'}, commit {commit}. "
        + (f"Configurations {m['configurations']}. " if "configurations" in m else "")
        + f"Measured on the {device}: copy bandwidth {rates['copy_bytes_per_s'] / 1e9:.1f} GB/s, "
        f"matmul {rates['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s.",
        "",
        f"Times are medians after warm-up{SYNCED if device != 'cpu' else ''}; *vs best other* is this time "
        f"over the fastest other system (below 1 = faster); *peak* is {peak}; *steady peak* the high-water "
        f"mark of the timed calls above {in_use} after "
        "warm-up (one-off plans, caches and loaded kernels excluded: they are in *peak*); *x floor* is "
        "time over the floor (bench/README.md); *check* is the gate's verdict "
        "against eager, with the worst error as a fraction of the tolerance (rtol 1e-4). Failed "
        "configurations are in bold: OOM (over the memory cap), TIMEOUT, MISMATCH (failed the gate, "
        "times not reported), UNCHECKED (the gate could not run, never timed), ERROR.",
        "",
        "## Datasets",
        "",
        *dataset_table(rows),
    ]
    summary = summary_table(rows, record["settings"]["modes"])
    if len(summary) > 2:
        out += [
            "",
            "## gnnc against the best peer",
            "",
            "`compiled` over the fastest PyG / DGL system that ran and matched eager on the same dataset "
            "(time) and over the leanest one (peak), median across datasets; below 1 = gnnc ahead.",
            "",
            *summary,
        ]
    for mode in record["settings"]["modes"]:
        out += ["", f"## {MODE_TITLES[mode]}", "", *mode_table(rows, mode)]
    firsts = first_calls(record)
    if firsts:
        out += [
            "",
            "## First calls of the compiling systems",
            "",
            "The first warm-up call compiles (torch.compile's inductor for pyg-compile, gnnc.compile's "
            "plans and kernels for compiled); it is never in the times above.",
            "",
            *firsts,
        ]
    warned = torch_logs.summary(rows)
    if warned:
        out += ["", warned]
    skipped = record.get("not_run") or {}
    if skipped:
        out += ["", f"## Systems not run ({device})", "", *(f"- {name}: {why}" for name, why in skipped.items())]
    peer = m.get("peer")
    if peer:
        out += [
            "",
            f"DGL systems ran in the peer interpreter: DGL {peer['dgl']} on torch {peer['torch']} (bench/peer_env.py).",
        ]
    if record["pairings"]:
        out += ["", "## How the PyG and DGL layers were configured to compute our function", ""]
        out += [
            f"- {MODELS[p['model']].title}, {p['system']}: {p['note']}"
            + (f" — differs: {p['differs']}" if p["differs"] else "")
            for p in record["pairings"]
        ]
    errs = errors(rows)
    if errs:
        out += ["", "## Errors", "", *errs]
    return "\n".join(out) + "\n"
