"""DGL 2.1.0's own Python tests run against gnnc through its DGL alias (issue 40's compatibility table).

    python bench/dgl_tests.py --mode both --out bench/results/dgl-tests/<commit>

Each test file runs in its own pytest process (``--timeout`` seconds at most, ``--jobs`` at a time), with
``--dgl-tests``/tests first on ``sys.path`` (DGL's tests import its top-level ``backend`` and ``utils``),
``DGLBACKEND=pytorch``, no bytecode or pytest cache written (the checkout may be read-only: rootdir and
temporary files live in a scratch folder) and the plugin ``bench/harness/dgl_plugin.py``, which installs
``gnnc.compat.dgl`` and, in ``compiled`` mode, runs every test with every message-passing call compiled.
gnnc is imported from this checkout's ``src``. Nothing from the DGL checkout is copied.

Writes ``results.json`` (every test's outcome per mode, its error line, its compiled plans and fallbacks)
and ``README.md`` (the per-file table, the exclusions and the top failure causes; ``harness/dgl_report``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.dgl_report import write_report  # bench/ is on sys.path: this script's own folder

REPO = Path(__file__).resolve().parents[1]

# issue 40's list, then the other files of tests/python/common on graph construction and message passing
# (not test_heterograph-pickle.py: it imports DGL's C++ graph index at module level, so none of its tests
# can run without DGL's FFI)
DEFAULT_FILES = [
    "python/common/function/test_basics.py",
    "python/common/test_heterograph-update-all.py",
    "python/common/test_heterograph-apply-edges.py",
    "python/common/test_heterograph-kernel.py",
    "python/common/test_propagate.py",
    "python/common/ops/test_edge_softmax.py",
    "python/common/test_batch-graph.py",
    "python/common/test_batch-heterograph.py",
    "python/common/test_readout.py",
    "python/common/test_heterograph.py",
    "python/common/test_subgraph.py",
    "python/common/transforms/test_to_block.py",
    "python/common/test_heterograph-misc.py",
    "python/common/test_heterograph-specialization.py",
    "python/common/test_heterograph-remove.py",
    "python/common/test_convert.py",
    "python/common/test_merge.py",
    "python/common/ops/test_ops.py",
    "python/common/transforms/test_transform.py",
    "python/pytorch/nn/test_nn.py",  # gnnc.nn's measure (issue 45): DGL's layers, those gnnc has
]
MODES = ("eager", "compiled")


def _commit() -> str:
    run = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


def run_file(tests_root: Path, rel: str, mode: str, timeout: float, sample: int = 0, select: str = "") -> dict:
    """One test file in one mode, in a fresh pytest process: its records and how the process ended; ``select``
    (pytest's ``-k`` expression) keeps only the tests it matches."""
    with tempfile.TemporaryDirectory(prefix="gnnc-dgl-tests-") as scratch:
        scratch = Path(scratch)
        (scratch / "pytest.ini").write_text("[pytest]\n")
        records = scratch / "records.jsonl"
        env = {
            **os.environ,
            "DGLBACKEND": "pytorch",
            "DGLTESTDEV": "cpu",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GNNC_DGL_MODE": mode,
            "GNNC_DGL_RECORDS": str(records),
            "GNNC_DGL_SAMPLE": str(sample),
            "OMP_NUM_THREADS": "1",
            "NUMBA_NUM_THREADS": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # installed plugins cost seconds of start-up; DGL uses none
            "PYTHONPATH": os.pathsep.join([str(tests_root), str(REPO / "src"), str(REPO / "bench")]),
        }
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-c",
            str(scratch / "pytest.ini"),
            "--rootdir",
            str(scratch),
            "--basetemp",
            str(scratch / "tmp"),
            "--tb=native",
            "-p",
            "no:cacheprovider",
            "-p",
            "harness.dgl_plugin",
            # their gc.collect at exit costs 2 s in a process holding torch; DGL's tests check neither
            "-p",
            "no:unraisableexception",
            "-p",
            "no:threadexception",
            *(["-k", select] if select else []),
            str(tests_root / rel),
        ]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
            status = done.returncode, _last_line(done.stdout + done.stderr)
        except subprocess.TimeoutExpired:
            status = None, f"timed out after {timeout:.0f} s"
        seconds = time.perf_counter() - start
        records = [json.loads(line) for line in (records.read_text().splitlines() if records.exists() else [])]
    for record in records:  # paths inside this checkout as the repository names them
        record["message"] = record.get("message", "").replace(f"{REPO}{os.sep}", "")
    uncollected = [r for r in records if r["outcome"] == "collection error"]
    for record in uncollected:  # it stands for every test function of the file
        record["tests"] = len(re.findall(r"^def test_", (tests_root / rel).read_text(), re.MULTILINE))
    # pytest's exit codes: 1 some tests failed, 2 interrupted (here: by the collection error recorded); no
    # record means the process failed before any test (the plugin, the alias, gnnc's import); 5: -k matched none
    ok = (records and (status[0] in (0, 1) or (status[0] == 2 and uncollected))) or (select and status[0] == 5)
    return {"status": "ok" if ok else status[1], "seconds": round(seconds, 1), "records": records}


def _last_line(text: str) -> str:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--dgl-tests",
        type=Path,
        default=REPO.parent / "shared" / "dgl-tests",
        help="a DGL 2.1.0 checkout's root (holding tests/); default ../shared/dgl-tests",
    )
    ap.add_argument("--mode", choices=("eager", "compiled", "both"), default="both")
    ap.add_argument("--files", nargs="+", default=DEFAULT_FILES, help="test files, relative to DGL's tests/")
    ap.add_argument("--out", type=Path, required=True, help="folder for results.json and README.md")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per test file and mode")
    ap.add_argument("--jobs", type=int, default=2, help="test files run at a time")
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="run at most this many parametrizations of each test function, the same ones every "
        "time (0: all; CI samples, the committed tables run all)",
    )
    ap.add_argument(
        "-k",
        dest="select",
        default="",
        help="pytest's -k expression: run only the tests it matches (a partial table, for checking a fix)",
    )
    args = ap.parse_args(argv)
    tests_root = args.dgl_tests.resolve() / "tests"
    missing = [f for f in args.files if not (tests_root / f).is_file()]
    if missing:
        ap.error(f"not in {tests_root}: {', '.join(missing)}")
    modes = MODES if args.mode == "both" else (args.mode,)
    jobs = [(rel, mode) for rel in args.files for mode in modes]
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        runs = list(pool.map(lambda job: run_file(tests_root, *job, args.timeout, args.sample, args.select), jobs))
    files: dict = {rel: {} for rel in args.files}
    for (rel, mode), run in zip(jobs, runs):
        files[rel][mode] = run
        print(f"{rel} [{mode}]: {run['status']}, {len(run['records'])} records, {run['seconds']} s", flush=True)
    broken = [f"{rel} [{mode}]" for (rel, mode), run in zip(jobs, runs) if run["status"] != "ok"]
    command = "python bench/dgl_tests.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = {
        "commit": _commit(),
        "command": command,
        "dgl_tests": os.path.relpath(args.dgl_tests, REPO),
        "modes": list(modes),
        "sample": args.sample,
        "select": args.select,
        "seconds": round(time.perf_counter() - start, 1),
        "files": files,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(results, args.out)
    print(f"wrote {args.out / 'results.json'} and {args.out / 'README.md'} ({results['seconds']} s)")
    if broken:
        print(f"runs that did not finish normally: {', '.join(broken)}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
