"""Command line shared by ``python bench/run.py`` and ``gnnc bench``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from gnnc import progress

from . import devices, plots, procfs, profiling, report, runner, zoo
from .datasets import DATASETS, DEFAULT_DATASETS, default_data_root
from .models import MODELS
from .systems import SYSTEMS
from .worker import MODES

BENCH = Path(__file__).resolve().parents[1]
PRESETS = {  # quick: small replicas; full: the sizes
    "quick": {"warmup": 1, "runs": 5, "min_runs": 3, "budget_s": 0.5, "timeout_s": 60.0},
    "full": {"warmup": 2, "runs": 10, "min_runs": 3, "budget_s": 60.0, "timeout_s": 600.0},
}
DEFAULT_MEM_FRACTION = 0.7  # of MemAvailable at the start of the run


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quick",
        action="store_true",
        help="small replicas, a 2,000-entity slice of FB15k-237, fewer runs (each configuration stops at --timeout)",
    )
    p.add_argument(
        "--models",
        nargs="+",
        choices=list(MODELS),
        default=list(MODELS),
        metavar="MODEL",
        help=f"models to run (default all: {' '.join(MODELS)})",
    )
    p.add_argument(
        "--datasets",
        nargs="+",
        choices=list(DATASETS),
        default=DEFAULT_DATASETS,
        metavar="DATASET",
        help=f"datasets (default: {' '.join(DEFAULT_DATASETS)}; "
        f"also {' '.join(n for n in DATASETS if n not in DEFAULT_DATASETS)}); each model runs on those of its kind",
    )
    p.add_argument(
        "--systems",
        nargs="+",
        choices=list(SYSTEMS),
        metavar="SYSTEM",
        help="systems to time (default every one available here of: "
        f"{' '.join(n for n, s in SYSTEMS.items() if s.default)}; also "
        f"{' '.join(n for n, s in SYSTEMS.items() if not s.default)})",
    )
    p.add_argument(
        "--modes",
        nargs="+",
        choices=list(MODES),
        default=list(MODES),
        metavar="MODE",
        help="inference and/or training (default both)",
    )
    p.add_argument(
        "--device",
        choices=devices.DEVICES,
        default="cpu",
        help="where graphs, features and layers live and what is timed (default cpu); cuda: the GPU, "
        "with its own clock (synchronized) and peak memory (torch.cuda.max_memory_allocated)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="results folder (default bench/results/quick or bench/results/full; "
        "quick-cuda or full-cuda with --device cuda)",
    )
    p.add_argument(
        "--runs",
        type=int,
        help="timed runs per configuration, at most (quick 5, full 10; "
        "at least 3, more only while within 0.5 s (quick) or 60 s)",
    )
    p.add_argument("--warmup", type=int, help="untimed warm-up calls (quick 1, full 2)")
    p.add_argument("--timeout", type=float, help="seconds per configuration before it is TIMEOUT (quick 60, full 600)")
    p.add_argument(
        "--mem-limit-gb",
        type=float,
        help=f"memory cap per configuration (default {DEFAULT_MEM_FRACTION * 100:.0f}%% of available "
        f"memory); with --device cuda, GPU memory (default the whole GPU)",
    )
    p.add_argument("--scale", type=float, help="replica scale for every replica dataset (overrides the preset)")
    p.add_argument(
        "--data-dir",
        type=Path,
        help="real datasets folder (default: $GNNC_DATA, else ../shared/data, else ~/.cache/gnnc/data)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="torch threads per configuration (default all cores); "
        "1 keeps timings sane on a machine shared with other jobs",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="after timing, profile a few more calls of each configuration: top operators by self "
        "CPU time, one file per model, dataset and mode in <out>/profiles/",
    )
    p.add_argument(
        "--profile-calls",
        type=int,
        default=profiling.DEFAULT_CALLS,
        metavar="N",
        help=f"calls profiled per configuration with --profile (default {profiling.DEFAULT_CALLS})",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the replicas, features and parameters (default 0)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the last run in the results file (one stopped before its end): configurations "
        "with a row keep it, the others run now; refused unless the options, gnnc's source and "
        "the peer environment are the ones it measured",
    )
    p.add_argument("--quiet", action="store_true", help="no per-configuration lines on stderr, only the table")
    p.add_argument(
        "--zoo",
        action="store_true",
        help="the zoo instead: layers of the world's model code (--world-code), gated, then timed against DGL "
        "running the same code and the built-ins computing the same function (harness/zoo.py; --threads "
        "default 2, --runs 5, --warmup 2, --out bench/results/zoo/<commit>)",
    )
    p.add_argument(
        "--world-code",
        type=Path,
        help="with --zoo: the world-code folder (default ../shared/world-code beside the repository)",
    )
    p.add_argument("--layers", nargs="+", metavar="LAYER", help="with --zoo: the layers (default the zoo's list)")
    p.add_argument("--jobs", type=int, help="with --zoo: rows run at a time (default 1)")


def out_dir(args: argparse.Namespace) -> Path:
    """``--out``, else ``bench/results/<quick|full>``, with a ``-cuda`` suffix on a GPU."""
    suffix = "" if args.device == "cpu" else f"-{args.device}"
    return args.out or BENCH / "results" / (("quick" if args.quick else "full") + suffix)


def settings_from(args: argparse.Namespace, command: str) -> runner.Settings:
    preset = PRESETS["quick" if args.quick else "full"]
    systems = args.systems or [
        name for name, system in SYSTEMS.items() if system.default and system.missing(args.device) is None
    ]
    overrides = {"runs": args.runs, "warmup": args.warmup, "timeout_s": args.timeout}
    mem_gb = args.mem_limit_gb
    if mem_gb:
        mem_cap = int(mem_gb * 2**30)
    else:  # on a GPU the allocator's own limit (the whole GPU) is the cap
        mem_cap = int(DEFAULT_MEM_FRACTION * procfs.available_bytes()) if args.device == "cpu" else None
    return runner.Settings(
        models=args.models,
        datasets=args.datasets,
        systems=systems,
        modes=args.modes,
        device=args.device,
        quick=args.quick,
        seed=args.seed,
        mem_cap_bytes=mem_cap,
        data_root=str(default_data_root(args.data_dir)),
        scale=args.scale,
        threads=args.threads,
        command=command,
        profile_dir=str(out_dir(args) / "profiles") if args.profile else None,
        profile_calls=args.profile_calls,
        **{**preset, **{k: v for k, v in overrides.items() if v is not None}},
    )


def write_report(record: dict, out: Path) -> list[Path]:
    """``table.md`` and the PNGs of ``record`` in ``out``, each written to a temporary file then renamed, so
    an interrupted run always leaves whole files; the PNG paths (none without matplotlib)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".table.md.tmp"
    tmp.write_text(report.markdown(record))
    os.replace(tmp, out / "table.md")
    return plots.plot(record, out)


def run_and_report(args: argparse.Namespace, command: str) -> int:
    """Run, append to ``<out>/results.json``; rewrite ``table.md`` and the PNGs there after every row; print the
    table."""
    progress.set_quiet(progress.quiet() or args.quiet)
    if args.zoo:
        return zoo.run(args, command)
    settings = settings_from(args, command)
    runner.validate(settings)  # before anything is printed or written: e.g. --device cuda without a GPU
    if args.systems is None:
        for name, why in runner.not_run(settings).items():
            progress.line(f"skipping system {name}: {why}")
    out = out_dir(args)
    results = runner.ResultsFile(out / "results.json")
    log = progress.line
    log(f"results, table and plots in {out}, rewritten after every configuration")
    record = runner.run(settings, results, log=log, on_row=lambda record: write_report(record, out), resume=args.resume)
    pngs = write_report(record, out)
    print(report.markdown(record))
    drawn = f"; plots {', '.join(map(str, pngs))}" if pngs else ""
    log(f"results appended to {out / 'results.json'}; table {out / 'table.md'}{drawn}")
    why = plots.missing()
    if why:  # even with --quiet: an output the user may expect is not there
        print(f"gnnc bench: no plots: {why}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=runner.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    return run_and_report(parser.parse_args(argv), shlex.join(["python", "bench/run.py", *argv]))
