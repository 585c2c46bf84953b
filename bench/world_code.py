"""The world's DGL layer code, unchanged, through gnnc's DGL alias: does it run, and match DGL 2.1?

    python bench/world_code.py --out bench/results/world-code/<commit>

For each program of ``harness/world_programs`` (a layer file from ``--world-code``, its constructor wired
and its inputs built by the harness, nothing in the file changed) three runs, each its own process
(``harness/world_worker``): gnnc eager (it writes the initial parameters), DGL 2.1 in the peer interpreter
(``python bench/peer_env.py`` builds it) and gnnc with the model in ``gnnc.compile``. Each trains two SGD
steps in float64 (float32 where a layer makes float32 tensors itself) on a random graph with multi-edges,
self loops and nodes without in-edges; every step's outputs, input gradients and parameter gradients of
both gnnc runs are compared with DGL's (``--rtol``/``--atol``; float32 rows ``FLOAT32_TOLERANCES``). A
compiled run *matches* only when a compiled plan ran; one that fell back says so.

Writes ``results.json`` (every run's status and the comparison) and ``README.md`` (the table).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import peer
from harness.world_gate import FLOAT32_TOLERANCES, run, tolerances, verdict
from harness.world_programs import PROGRAMS

BENCH = Path(__file__).resolve().parent

SYSTEMS = ("gnnc", "dgl", "gnnc-compiled")


def evaluate(program, world_code: Path, folder: Path, args) -> dict:
    rtol, atol = tolerances(program, args.rtol, args.atol)
    runs = {}
    for system in SYSTEMS:  # eager first: it writes the parameters the others load
        runs[system] = run(system, program.name, world_code, folder, args.timeout)
    row = {
        "program": program.name,
        "project": program.project,
        "file": program.file,
        "dgl": "ok" if runs["dgl"]["status"] == "ok" else f"error: {runs['dgl']['error']}",
        "dtype": str(program.dtype).removeprefix("torch."),
        "eager": verdict(runs["gnnc"], runs["dgl"], rtol, atol),
        "compiled": verdict(runs["gnnc-compiled"], runs["dgl"], rtol, atol),
        "compiled_plans": runs["gnnc-compiled"].get("compiled_plans", 0),
        "fallbacks": runs["gnnc-compiled"].get("fallbacks", []),
    }
    if row["compiled"] == "match" and (row["fallbacks"] or not row["compiled_plans"]):
        row["compiled"] = "match, fell back" if row["fallbacks"] else "match, no compiled plan ran"
    print(f"{program.name:24} eager: {row['eager'][:70]:70} compiled: {row['compiled'][:60]}", flush=True)
    return row


def table(rows: list[dict], header: str) -> str:
    lines = [
        header,
        "",
        "| program | project | dtype | DGL 2.1 | gnnc eager | gnnc compiled | compiled plans | fallback |",
        "|---|---|---|---|---|---|--:|---|",
    ]
    for r in rows:
        cells = [
            r["program"],
            r["project"],
            r["dtype"],
            r["dgl"],
            r["eager"],
            r["compiled"],
            str(r["compiled_plans"]),
            "; ".join(r["fallbacks"]),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    both = sum(r["eager"] == "match" and r["compiled"] == "match" for r in rows)
    eager = sum(r["eager"] == "match" for r in rows)
    lines += [
        "",
        (
            f"**{both} of {len(rows)}** programs match DGL in both modes with a compiled plan run; "
            f"{eager} of {len(rows)} match eagerly."
        ),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-code", type=Path, default=BENCH.parents[1] / "shared" / "world-code")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="+", help="program names")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-9)
    args = parser.parse_args()
    if peer.peer_python() is None:
        sys.exit(f"bench/world_code.py needs DGL as the oracle: {peer.missing()}")
    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda p: evaluate(p, args.world_code.resolve(), Path(scratch), args), programs))
    seconds = time.perf_counter() - started
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True, cwd=BENCH
    ).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(
            {"commit": commit, "seconds": round(seconds), "rtol": args.rtol, "atol": args.atol, "rows": rows}, indent=1
        )
    )
    header = (
        f"# The world's DGL layer code through gnnc's DGL alias, against DGL 2.1, at {commit}\n\n"
        f"    python bench/world_code.py --out {args.out}\n\n"
        f"Files from `../shared/world-code`, unchanged; two SGD steps in float64, every output, input "
        f"gradient and parameter gradient compared with DGL's (rtol {args.rtol:g}, atol {args.atol:g}; float32 "
        f"rows rtol {FLOAT32_TOLERANCES[0]:g}, atol {FLOAT32_TOLERANCES[1]:g}); "
        f"{round(seconds)} s. *compiled*: the model in `gnnc.compile`; it matches only when a compiled "
        f"plan ran."
    )
    (args.out / "README.md").write_text(table(rows, header))
    print(table(rows, "")[-200:])


if __name__ == "__main__":
    main()
