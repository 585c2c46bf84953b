"""Long run of the differential UDF fuzzer: random user-style UDF programs, compiled vs eager.

    python -m tests.udf_fuzz_run --programs 20000 --seed 0 [--jobs 2] [--out report.json] [--failures DIR]
    python -m tests.udf_fuzz_run --programs 20000 --seed 0 --skip 16000   # the last 4,000 of that run only
    python -m tests.udf_fuzz_run --only SEED          # rerun (and print) one program

Prints programs tried, matches, mismatches, kinks (gradients on integer inputs that
differ only where a ReLU meets a sum that cancels exactly), roundings (differences no
larger than eager's own float64 noise under Monte Carlo arithmetic; both are explained
in ``tests/udf_fuzz_gen.py``), crashes, fallbacks by reason, runs with no compiled plan (``no_plan``; "match"
means a plan ran), and ``unexpected`` outcomes: a program that should compile fell back or ran no plan, or
one designed to fall back did not (``Program.expect``); writes each failing program's source (with its seed and
error) to the failures folder.
The generator and runner live in ``tests/udf_fuzz_gen.py`` (shared with the CI sample).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

from tests.udf_fuzz_gen import Outcome, generate, run_program, sample_seeds, unexpected

BAD = ("mismatch", "crash")


def _init_worker():
    import warnings

    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")


def _one(seed: int):
    program = generate(seed)
    try:
        outcome = run_program(program)
    except BaseException as err:  # noqa: BLE001 - the harness itself must survive a program
        outcome = Outcome("crash", seed, f"harness: {type(err).__name__}: {err}"[:160], repr(err), program.tags)
    return outcome, program.source, unexpected(program, outcome)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out the run's first SKIP programs (to split one run across processes)",
    )
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", help="JSON report path")
    ap.add_argument("--failures", default="udf_fuzz_failures", help="folder for failing programs' sources")
    ap.add_argument("--only", type=int, help="run one program seed and print its source and outcome")
    args = ap.parse_args(argv)

    if args.only is not None:
        _init_worker()
        outcome, source, wrong = _one(args.only)
        print(source)
        print(f"# seed {args.only}: {outcome.status} {outcome.reason} ({outcome.plans} plans ran)\n{outcome.detail}")
        if wrong:
            print(f"# unexpected: {wrong}")
        return 1 if outcome.status in BAD or wrong else 0

    seeds = sample_seeds(args.seed, args.programs)[args.skip :]
    counts: collections.Counter = collections.Counter()
    reasons: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples: dict[tuple, int] = {}
    tag_fail: collections.Counter = collections.Counter()
    failures = Path(args.failures)
    start = time.time()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover

        def tqdm(it, **_):
            return it

    if args.jobs > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(args.jobs, initializer=_init_worker, maxtasksperchild=200)
        results = pool.imap_unordered(_one, seeds, chunksize=4)
    else:
        _init_worker()
        pool, results = None, map(_one, seeds)
    try:
        for outcome, source, wrong in tqdm(results, total=len(seeds), desc="udf fuzz"):
            counts[outcome.status] += 1
            if wrong:
                counts["unexpected"] += 1
                reasons["unexpected"][wrong[:160]] += 1
                examples.setdefault(("unexpected", wrong[:160]), outcome.seed)
            if outcome.status != "match":
                reasons[outcome.status][outcome.reason] += 1
                examples.setdefault((outcome.status, outcome.reason), outcome.seed)
            if outcome.status in BAD or wrong:
                for t in outcome.tags:
                    tag_fail[t] += 1
                failures.mkdir(parents=True, exist_ok=True)
                header = "".join(
                    f"# {line}\n"
                    for line in [
                        f"seed {outcome.seed}: {outcome.status}: {outcome.reason}",
                        f"unexpected: {wrong}",
                        f"tags: {outcome.tags}",
                        *outcome.detail.splitlines()[-30:],
                    ]
                )
                (failures / f"{'unexpected' if wrong else outcome.status}_{outcome.seed}.py").write_text(
                    header + source
                )
    finally:
        if pool is not None:
            pool.terminate()
    elapsed = time.time() - start
    total = sum(counts.values())
    print(f"\nprograms tried: {total} in {elapsed:.0f} s (seed {args.seed}, skip {args.skip}, jobs {args.jobs})")
    for status in (
        "match",
        "no_plan",
        "mismatch",
        "kink",
        "rounding",
        "crash",
        "fallback",
        "both_raise",
        "eager_error",
        "unexpected",
    ):
        print(f"  {status:12s} {counts[status]}")
    for status in ("mismatch", "kink", "rounding", "crash", "fallback", "both_raise", "eager_error", "unexpected"):
        if reasons[status]:
            print(f"{status} by reason:")
            for reason, n in reasons[status].most_common():
                print(f"  {n:6d}  {reason}   (e.g. seed {examples[(status, reason)]})")
    if tag_fail:
        print("tags of failing programs:", dict(tag_fail.most_common(12)))
    if counts["mismatch"] or counts["crash"] or counts["unexpected"]:
        print(f"failing programs' sources: {failures}/ (rerun one: python -m tests.udf_fuzz_run --only SEED)")
    if args.out:
        report = {
            "programs": total,
            "seed": args.seed,
            "skip": args.skip,
            "seconds": round(elapsed, 1),
            "counts": dict(counts),
            "reasons": {s: dict(r) for s, r in reasons.items()},
            "examples": {f"{s}: {r}": seed for (s, r), seed in examples.items()},
            "command": " ".join(["python -m tests.udf_fuzz_run", *sys.argv[1:]]),
        }
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if counts["mismatch"] or counts["crash"] or counts["unexpected"] else 0


if __name__ == "__main__":
    sys.exit(main())
