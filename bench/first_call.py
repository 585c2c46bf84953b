"""First compiled calls against the next, per stage (``gnnc.stage_timings``), cold and warm (issue 43).

Each case runs in a fresh process: the harness's RGCN / RGAT / HGT layer (``--models``) on the mag replica
at ``--scale``, through ``gnnc.compile``, for ``--steps`` training steps (forward, sum loss, backward, SGD;
the harness's ``make_step``), or PNAConv in the size of DGL's ``test_pna_conv`` (``pna``: two of its
configurations, each called twice). Every step is recorded by stage.

- **cold**: the process sees an empty gnnc cache folder (``XDG_CACHE_HOME`` and ``GNNC_KERNEL_DIR`` in a
  fresh temporary folder) and no numba cache files of gnnc's static kernels (the ``*.nbi`` / ``*.nbc``
  files in the imported gnnc's ``__pycache__`` folders are deleted first);
- **warm**: the next process on the same folders, so both caches hold what the cold one wrote.

Writes ``<out>/<case>-<scale>-<state>.json`` (the step tables) and ``<out>/table.md`` (a summary, then every
case's stages with its calls side by side; ``--render <out>`` rewrites it from the result files)::

    python bench/first_call.py --models rgcn rgat hgt pna --scale 0.05 --threads 2 --out bench/results/first-call/X
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("rgcn", "rgat", "hgt", "pna")


def _pna_steps(steps: int) -> list:
    """Two test_pna_conv configurations (5 nodes, 20 edges), each called ``steps`` times."""
    import torch

    import gnnc
    from gnnc.graph.generators import rand_graph
    from gnnc.nn import PNAConv

    configs = [
        (16, 16, ["mean", "max", "sum"], ["identity"], 2.5, 0.0, 1, 16, True),
        (32, 16, ["min", "std", "var"], ["amplification", "attenuation"], 7.4, 0.0, 4, 0, False),
    ]
    calls = []
    for in_size, *rest in configs:
        torch.manual_seed(0)
        g = rand_graph(5, 20)
        h, e = torch.randn(5, in_size), torch.randn(20, rest[6])
        model = gnnc.compile(PNAConv(in_size, *rest))
        calls += [(f"{in_size}/{rest[0]} {'+'.join(rest[1])}", lambda m=model, g=g, h=h, e=e: m(g, h, edge_feat=e))]
    return [(f"{name} #{i + 1}", call) for name, call in calls for i in range(steps)]


def _mag_steps(model: str, scale: float, steps: int) -> list:
    sys.path.insert(0, str(HERE))
    import gnnc
    from harness.case import Case, prepared_like_eager
    from harness.datasets import default_data_root, load
    from harness.models import MODELS
    from harness.timing import make_step

    data = load("mag", quick=False, seed=0, root=default_data_root(), scale=scale)
    case = Case.build(MODELS[model], data, seed=0)
    step = make_step(prepared_like_eager(gnnc.compile(case.eager), case), data.x, "training")
    return [(f"step {i + 1}", step) for i in range(steps)]


def child(case: str, scale: float, threads: int, steps: int) -> dict:
    """Run ``case``'s steps in this process; each step's stage table (seconds)."""
    import torch

    from gnnc import stage_timings

    torch.set_num_threads(threads)
    calls = _pna_steps(steps) if case == "pna" else _mag_steps(case, scale, steps)
    rows = []
    for name, call in calls:
        with stage_timings.recording() as times:
            call()
        rows.append({"call": name, "wall_s": times.wall, "stages": times.table(), "counts": times.counts})
    return {"case": case, "scale": scale, "threads": threads, "calls": rows}


def numba_cache_files() -> list[Path]:
    """numba's cache files of the gnnc package the child processes import (its static kernels)."""
    import gnnc

    root = Path(gnnc.__file__).parent
    return [p for pattern in ("*.nbi", "*.nbc") for p in root.rglob(f"__pycache__/{pattern}")]


def run_case(case: str, args, cache_home: Path, state: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), GNNC_KERNEL_DIR=str(cache_home / "gnnc" / "kernels"))
    cmd = [sys.executable, __file__, "--child", case, "--scale", str(args.scale), "--threads", str(args.threads)]
    cmd += ["--steps", str(args.steps)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["state"] = state
    return result


def format_table(result: dict) -> str:
    """The calls' stage tables side by side (``gnnc.stage_timings.side_by_side``)."""
    from gnnc.stage_timings import OUTSIDE, StageTimes, side_by_side

    calls = result["calls"]
    names = [c["call"] for c in calls]
    if len(set(names)) < len(names):  # (files written before PNA's calls were numbered)
        names = [f"{name} #{i + 1}" for i, name in enumerate(names)]
    columns = {}
    for name, c in zip(names, calls):
        stages = {n: s for n, s in c["stages"].items() if n != OUTSIDE}
        columns[name] = StageTimes(stages, c["counts"], c["wall_s"])
    return side_by_side(columns)


GROUPS = {  # stage name prefix -> the summary's column
    "pass ": "passes",
    "numba ": "numba compile/load",
    "backend import": "backend import",
    "graph preparation": "graph preparation",
    "plan run": "plan run",
}


def section(result: dict) -> str:
    case, state = result["case"], result["state"]
    where = "test_pna_conv size" if case == "pna" else f"mag {result['scale']:g}"
    return f"## {case} ({where}), {state}\n\n```\n{format_table(result)}\n```\n"


def summary(results: list[dict]) -> str:
    """One row per case and state: first and second call's wall time, their ratio, and the first call's own
    seconds in the stage groups of ``GROUPS`` (the rest: tracing, shape inference, lowering, ..., and the
    time outside any stage)."""
    columns = list(dict.fromkeys(GROUPS.values()))
    lines = [
        f"| case | state | first s | second s | ratio | {' | '.join(columns)} | rest |",
        "|---|---|" + "--:|" * (len(columns) + 4),
    ]
    for r in results:
        first, second = r["calls"][0], r["calls"][1]
        grouped = dict.fromkeys(columns, 0.0)
        for name, seconds in first["stages"].items():
            group = next((g for prefix, g in GROUPS.items() if name.startswith(prefix)), None)
            if group is not None:
                grouped[group] += seconds
        rest = first["wall_s"] - sum(grouped.values())
        cells = " | ".join(f"{v:.1f}" for v in grouped.values())
        lines.append(
            f"| {r['case']} | {r['state']} | {first['wall_s']:.1f} | {second['wall_s']:.1f} | "
            f"{first['wall_s'] / second['wall_s']:.1f}x | {cells} | {rest:.1f} |"
        )
    return "\n".join(lines)


def render(folder: Path) -> None:
    """``table.md`` in ``folder`` from its result files: the summary, then every case's stage table."""
    order = {case: i for i, case in enumerate(CASES)}
    results = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    results.sort(key=lambda r: (r["scale"], order[r["case"]], r["state"] != "cold"))
    text = "\n".join([summary(results) + "\n", *(section(r) for r in results)])
    (folder / "table.md").write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--states", nargs="+", choices=("cold", "warm"), default=["cold", "warm"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--render", type=Path, metavar="DIR", help="only rewrite DIR/table.md from DIR's result files")
    ap.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.render:
        render(args.render)
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.scale, args.threads, args.steps)))
        return 0
    for case in args.models:
        cache_home = Path(tempfile.mkdtemp(prefix="gnnc-first-call-"))
        try:
            for state in args.states:
                if state == "cold":
                    for p in numba_cache_files():
                        p.unlink()
                result = run_case(case, args, cache_home, state)
                print(section(result), flush=True)
                if args.out:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / f"{case}-{args.scale:g}-{state}.json").write_text(json.dumps(result, indent=1) + "\n")
        finally:
            shutil.rmtree(cache_home, ignore_errors=True)
    if args.out:
        render(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
