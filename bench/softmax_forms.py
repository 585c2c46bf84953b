"""Hand-written edge softmax against ``F.softmax``: a 2-layer, 4-head GAT training step, eager and compiled.

The GAT is written as DGL-era code writes it: attention logits from ``apply_edges``, the messages
copied into the mailbox, and the softmax in the reduce UDF, in one of several forms (issue 45). Each
form runs forward + backward on a synthetic replica; times are medians of --runs steps after warm-up,
all forms interleaved round by round so a load change on the machine hits every form alike. The
compiled rows must run the fused softmax aggregation (the script stops otherwise).

    python bench/softmax_forms.py --dataset cora --runs 15 --out bench/results/softmax-forms
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

import torch
from torch import nn
from torch.nn import functional as F

import gnnc
from gnnc import data
from gnnc.compiler import driver as compiled
from gnnc.ir import operators as ops


def _max_values(e):
    p = torch.exp(e - e.max(1, keepdim=True).values)
    return p / p.sum(1, keepdim=True)


def _amax(e):
    p = torch.exp(e - e.amax(1, keepdim=True))
    return p / p.sum(1, keepdim=True)


def _no_max(e):
    p = torch.exp(e)
    return p / p.sum(1, keepdim=True)


def _split(e):
    top = e.max(1, keepdim=True)[0]
    p = (e - top).exp()
    total = p.sum(1, keepdim=True)
    return p / total


FORMS = {
    "F.softmax": lambda e: F.softmax(e, dim=1),
    "max(...).values": _max_values,
    "amax": _amax,
    "no max subtraction": _no_max,
    "split statements": _split,
    "exp(log_softmax)": lambda e: torch.exp(F.log_softmax(e, dim=1)),
}


class HandGATLayer(nn.Module):
    """One multi-head GAT layer with the softmax ``form`` in its reduce UDF."""

    def __init__(self, in_dim, out_dim, heads, form):
        super().__init__()
        self.heads, self.out_dim, self.form = heads, out_dim, form
        self.fc = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.attn_l = nn.Parameter(0.1 * torch.randn(1, heads, out_dim))
        self.attn_r = nn.Parameter(0.1 * torch.randn(1, heads, out_dim))

    def attention(self, edges):
        e = (edges.src["z"] * self.attn_l).sum(-1) + (edges.dst["z"] * self.attn_r).sum(-1)
        return {"e": F.leaky_relu(e, 0.2)}

    def message(self, edges):
        return {"z": edges.src["z"], "e": edges.data["e"]}

    def reduce(self, nodes):
        alpha = self.form(nodes.mailbox["e"])
        return {"h": (alpha.unsqueeze(-1) * nodes.mailbox["z"]).sum(1)}

    def forward(self, g, x):
        with g.local_scope():
            g.ndata["z"] = self.fc(x).view(-1, self.heads, self.out_dim)
            g.apply_edges(self.attention)
            g.update_all(self.message, self.reduce)
            return g.ndata["h"]


class HandGAT(nn.Module):
    def __init__(self, in_dim, hidden, classes, heads, form):
        super().__init__()
        self.layer1 = HandGATLayer(in_dim, hidden, heads, form)
        self.layer2 = HandGATLayer(heads * hidden, classes, 1, form)

    def forward(self, g, x):
        return self.layer2(g, F.elu(self.layer1(g, x).flatten(1))).squeeze(1)


def _step(model, g, x, labels):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(g, x), labels).backward()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--out", help="folder for results.json and README.md")
    args = p.parse_args()

    ds = data.synthetic(args.dataset, scale=args.scale, seed=0)
    g, x = ds.graph, ds.graph.ndata["feat"]
    labels = torch.randint(0, 7, (g.num_nodes(),), generator=torch.Generator().manual_seed(0))
    rows = {}
    for name, form in FORMS.items():
        torch.manual_seed(0)
        model = HandGAT(x.shape[1], args.hidden, 7, args.heads, form)
        rows[(name, "eager")] = model
        rows[(name, "compiled")] = gnnc.compile(model)
    times = {key: [] for key in rows}
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        for key, model in rows.items():  # warm-up: traces, kernels, CSR; the compiled rows' plans checked
            with compiled.recording() as plans:
                _step(model, g, x, labels)
            fused = any(n.target is ops.sddmm_softmax_aggregate for plan in plans for n in plan.dfg.graph.nodes)
            if key[1] == "compiled" and not fused:
                raise SystemExit(f"{key[0]}: the compiled plan has no fused softmax aggregation")
        for run in range(args.runs):
            print(f"round {run + 1} of {args.runs}", file=sys.stderr, flush=True)
            for key, model in rows.items():
                start = time.perf_counter()
                _step(model, g, x, labels)
                times[key].append(1e3 * (time.perf_counter() - start))
    medians = {key: statistics.median(t) for key, t in times.items()}
    reference = medians[("F.softmax", "compiled")]
    lines = [f"{'form':<22}{'eager ms':>10}{'compiled ms':>13}{'vs F.softmax compiled':>23}"]
    for name in FORMS:
        eager, fast = medians[(name, "eager")], medians[(name, "compiled")]
        lines.append(f"{name:<22}{eager:>10.1f}{fast:>13.1f}{fast / reference:>22.2f}x")
    table = "\n".join(lines)
    print(f"{args.dataset} replica x{args.scale}: {g.num_nodes()} nodes, {g.num_edges()} edges\n{table}")
    if args.out:
        _write(args, g, table, times)


def _write(args, g, table, times) -> None:
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(
            {
                "commit": commit,
                "dataset": args.dataset,
                "scale": args.scale,
                "nodes": g.num_nodes(),
                "edges": g.num_edges(),
                "heads": args.heads,
                "hidden": args.hidden,
                "threads": torch.get_num_threads(),
                "ms": {f"{name} / {mode}": t for (name, mode), t in times.items()},
            },
            f,
            indent=1,
        )
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(
            f"# Hand-written edge softmax in a 2-layer, {args.heads}-head GAT, at {commit}\n\n"
            f"    python bench/softmax_forms.py --dataset {args.dataset} --scale {args.scale} --runs {args.runs} "
            f"--out {args.out}\n\n"
            f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"{os.cpu_count()} cores shared with other work; one training step (forward + backward), "
            f"medians of {args.runs} steps, forms interleaved. {args.dataset} replica x{args.scale}: "
            f"{g.num_nodes()} nodes, {g.num_edges()} edges.\n\n```\n{table}\n```\n"
        )


if __name__ == "__main__":
    main()
