"""The epoch model (``projection``) against emulated runs, then projected onto the T4 cluster.

    python bench/projection_tables.py --emulated RUNS.json [RUNS2.json ...] --dilation DILATION.json
                                      [--counts MACHINES=REPORT.json ...] [--latency-us 25]

``RUNS.json``: ``emulated_training.py --measure-rate R --dilation D --json``.
Each configuration's compute is taken once per file, from its run on the
fast, undilated links (the "(compute)" rows); the model then predicts
every other row of the file from its link's bandwidth and the bytes and
rounds the run counted. The projection takes each configuration's compute
from the last file that has it. ``DILATION.json``: ``dilation.py --json``, whose D turns this box's
compute into a T4's for the projection (the stages' CPU seconds / D: what
the stage costs a core of its own, with the box's load taken out). Links
of the projection: 10 and 100 Gbit/s with ``--latency-us`` one-way latency
per round. ``--counts M=FILE`` adds M machines whose bytes and rounds
come from ``distributed_comm.py --nproc M --json FILE`` (loopback: the
counters do not depend on the link) and whose compute per step is that of the largest measured machine
count (an assumption, said in the table). Last, the sweep of D (1 to 512)
at both link speeds: the vanilla-METIS / RAF epoch ratio (RAF exact and
with Heta's copies) and the D where it reaches 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from emulated_machines import parse_rate
from projection import Link, Profile, crossover

LINKS = {"10gbit": 10e9, "100gbit": 100e9}
SWEEP = (1, 2, 4, 8, 16, 32, 64, 100, 128, 256, 512)
RAF, COPIES, VANILLA = "RAF (meta, exact)", "RAF (meta, Heta copies)", "vanilla METIS"


def compute_rows(runs: list) -> dict:
    """{(machines, label): row} of the runs on the fast, undilated links."""
    return {(r["machines"], r["label"]): r for r in runs if r["rate"].endswith("(compute)")}


def check(runs: list) -> list:
    """Every dilated run's measured epoch beside the model's prediction from its compute row."""
    base = compute_rows(runs)
    out = []
    for r in runs:
        if r["rate"].endswith("(compute)"):
            continue
        b = base[(r["machines"], r["label"])]
        profile = Profile.from_report(b["report"], Link(parse_rate(b["shaped"])))
        predicted = profile.predict(Link(parse_rate(r["shaped"])))
        out.append((r, predicted, predicted / r["epoch_seconds"] - 1))
    return out


def cluster_profiles(runs: list, dilation: float, counts: dict) -> dict:
    """{(machines, label): Profile} of the T4 cluster: each compute row's CPU seconds / D, plus the
    machine counts of ``counts`` ({machines: {label: report}}) with the largest measured count's compute."""
    profiles = {}
    for (m, label), row in compute_rows(runs).items():
        profiles[(m, label)] = Profile.from_report(row["report"], Link(1.0), clock="cpu").scaled(dilation)
    largest = max(m for m, _ in profiles)
    for m, reports in counts.items():
        for label, report in reports.items():
            profiles[(m, label)] = profiles[(largest, label)].with_traffic(report)
    return profiles


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emulated", nargs="+", required=True)
    p.add_argument("--dilation", required=True, help="dilation.py --json output")
    p.add_argument("--counts", nargs="*", default=[], metavar="M=FILE", help="distributed_comm.py --json of M workers")
    p.add_argument("--latency-us", type=float, default=25.0)
    args = p.parse_args(argv)
    files = [json.loads(Path(f).read_text()) for f in args.emulated]
    runs = [r for f in files for r in f]
    dil = json.loads(Path(args.dilation).read_text())
    dilation = dil["dilation"]
    latency = args.latency_us * 1e-6
    counts = {}
    for item in args.counts:
        m, path = item.split("=", 1)
        counts[int(m)] = {label: row["report"] for label, row in json.loads(Path(path).read_text()).items()}

    print(
        "1. The model against the emulated runs (links dilated by D, no added latency: no netem here); compute "
        "from each configuration's run on fast links in the same sweep (wall seconds less modelled wire)"
    )
    print(
        f"{'machines':>8} {'configuration':<24} {'cluster link':>12} {'D':>5} {'shaped':>11} {'measured s':>10} "
        f"{'model s':>8} {'error':>7}  load"
    )
    worst = 0.0
    for r, predicted, err in (row for f in files for row in check(f)):
        worst = max(worst, abs(err))
        print(
            f"{r['machines']:>8} {r['label']:<24} {r['rate']:>12} {r['dilation']:>5g} {r['shaped']:>11} "
            f"{r['epoch_seconds']:>10.2f} "
            f"{predicted:>8.2f} {err:>+7.1%}  {r['load'][0]:.1f}-{r['load'][1]:.1f}"
        )
    print(f"largest error {worst:.1%}")

    profiles = cluster_profiles(runs, dilation, counts)
    measured = sorted({m for m, _ in compute_rows(runs)})
    print()
    print(
        f"2. PROJECTION (not measured) of the T4 cluster: compute = this box's CPU seconds per stage / D, "
        f"D = {dilation:.1f} ({dil['median_cpu']:.3f} s one-core step at scale {dil['scale']}, fanouts "
        f"{dil['fanouts']}, / 0.1197 s T4 step); links with {args.latency_us:g} us one-way latency per round; "
        f"mag replica scale of the emulated runs; machines {measured} from their own runs"
        + (
            f", {sorted(counts)} with their counted bytes and the compute per step of {max(measured)} machines"
            if counts
            else ""
        )
    )
    print(
        f"{'machines':>8} {'link':>8} "
        + " ".join(f"{label:>24}" for label in (RAF, COPIES, VANILLA))
        + "  vanilla/RAF exact"
    )
    for m in sorted({m for m, _ in profiles}):
        for name, bps in LINKS.items():
            link = Link(bps, latency)
            epochs = {
                label: profiles[(m, label)].predict(link) for label in (RAF, COPIES, VANILLA) if (m, label) in profiles
            }
            print(
                f"{m:>8} {name:>8} "
                + " ".join(
                    f"{epochs[label] * 1e3:>21.1f} ms" if label in epochs else f"{'-':>24}"
                    for label in (RAF, COPIES, VANILLA)
                )
                + f"  {epochs[VANILLA] / epochs[RAF]:>10.2f}x"
            )

    print()
    print(
        "3. Sweep of D (PROJECTION): vanilla-METIS / RAF epoch ratio with compute = CPU seconds / D; "
        f"links 10 and 100 Gbit/s, {args.latency_us:g} us latency"
    )
    print(
        f"{'machines':>8} {'link':>8} {'RAF':<7} "
        + " ".join(f"{'D=' + str(d):>7}" for d in SWEEP)
        + "  D where RAF reaches 2x"
    )
    cpu = {
        (m, label): Profile.from_report(r["report"], Link(1.0), clock="cpu")
        for (m, label), r in compute_rows(runs).items()
    }
    for m in measured:
        for name, bps in LINKS.items():
            for raf, short in ((RAF, "exact"), (COPIES, "copies")):
                if (m, raf) not in cpu:
                    continue
                link = Link(bps, latency)

                def ratio(d, m=m, link=link, raf=raf):
                    return cpu[(m, VANILLA)].scaled(d).predict(link) / cpu[(m, raf)].scaled(d).predict(link)

                cross = crossover(ratio, SWEEP)
                print(
                    f"{m:>8} {name:>8} {short:<7} "
                    + " ".join(f"{ratio(d):>7.2f}" for d in SWEEP)
                    + f"  {'never (up to 512)' if cross is None else f'{cross:.0f}'}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
