"""Natural-UDF GNN layers (``natural_models.py``, written as DGL users write them) compiled, next to gnnc's
own layers compiled and the natural UDFs eager (issue 13's "what it must show" table).

Systems, per (model, dataset):

- ``layer``: gnnc's reference layer from ``gnnc.models``, ``gnnc.compile``d (GCN, GAT, RGCN, RGAT, HGT;
  GraphSAGE and GIN have none);
- ``compiled``: the natural layer under ``gnnc.compile``; ``FallbackWarning`` messages are recorded;
- ``eager``: the natural layer as is.

Modes: ``inference`` (one forward under ``torch.no_grad()``) and ``training`` (zero_grad, forward, sum,
backward, SGD step), in that order. Each (model, dataset) runs in fresh subprocesses (``--timeout`` seconds
each):

- **time**, one subprocess for all systems, side by side: per mode ``--warmup`` calls of each, then
  ``--repeat`` rounds of one call of each, so that the shared machine's drift reaches every system alike
  (timed in separate processes, one row's ratio moved from 1.0x to 1.7x between runs); the median per
  system. A round times eager first, then makes one untimed call (eager's long, memory-hungry calls slowed
  the next call by up to 1.2x), then times the layer and the compiled natural layer in an order rotated
  every round.
- **memory**, one subprocess per system: the benchmark harness's peak (``bench/harness/timing``): resident-set
  high-water mark over the warm-up and timed calls above the resident set before them, with library pages
  mapped first, ``VmHWM`` reset through ``/proc/self/clear_refs`` and freed heap trimmed; the training row's
  peak starts after the inference calls (plans built there count in inference's peak). Every allocation above
  128 KiB is mapped and unmapped by itself (``procfs.fix_mmap_threshold``): glibc's moving mmap threshold
  otherwise keeps freed tensors in the heap, and one row's peak moved by 15 MiB between runs. Those calls are
  slower for it, so the table's times come from the time subprocess only.

Check (the compiled system's memory subprocess, after its calls, from the initial parameters): the compiled
natural layer's output, and in training its parameter gradients, within the harness's tolerance
(``harness.equivalence.error_ratio``: ``|a - b| <= rtol * (|b| + max|b|)``) of the same layer run eagerly; where the
natural layer computes the same function as gnnc's layer (all but GIN; the weights are copied from it) the eager
natural output is also compared with gnnc's layer run eagerly. A float32 parameter
gradient beyond the tolerance (a sum over millions of edges that cancels) is arbitrated by the eager natural layer in
float64: it passes when the compiled gradient is no farther from float64 than eager float32's.

Homogeneous models run on the pubmed / arxiv replicas, relational ones on mutag / bgs, converted to one
homogeneous graph with ``edata['rel_type']`` / ``ndata['ntype']`` (DGL's ``to_homogeneous``) for the natural
layers; 64-wide features, 64 outputs (GAT / RGAT / HGT: 8 heads of 8).

    python bench/natural_udfs.py --timeout 300 --out bench/results/natural
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MODELS = ("gcn", "gat", "gat_heads", "sage", "gin", "rgcn", "rgat", "hgt")
TITLES = {
    "gcn": "GCN",
    "gat": "GAT (tutorial: a layer per head)",
    "gat_heads": "GAT (heads in one view)",
    "sage": "GraphSAGE",
    "gin": "GIN",
    "rgcn": "RGCN",
    "rgat": "RGAT",
    "hgt": "HGT",
}
HOMO_MODELS = ("gcn", "gat", "gat_heads", "sage", "gin")
# the natural layer computes the same function as a gnnc layer (GIN's reduce writes 'h' only where messages
# arrive: DGL gives nodes without in-edges zeros there, where GINConv keeps (1 + eps) h)
WITH_LAYER = ("gcn", "gat", "gat_heads", "sage", "rgcn", "rgat", "hgt")
DATASETS = ("pubmed", "arxiv", "mutag", "bgs")
HOMO_DATASETS = ("pubmed", "arxiv")
SYSTEMS = ("layer", "compiled", "eager")
MODES = ("inference", "training")
WIDTH, HEADS = 64, 8


# ----------------------------------------------------------------------------- models and weights
def build(model: str, data):
    """(gnnc layer or None, natural layer with the layer's weights where the math is the same)."""
    import torch

    import natural_models as nm
    from gnnc import models as gm

    g = data.graph
    torch.manual_seed(0)
    d = data.x.shape[1]
    R, T = len(g.etypes), len(g.ntypes)
    layer = None
    with torch.no_grad():
        if model == "gcn":
            layer = gm.GCNConv(d, WIDTH)
            nat = nm.GCNLayer(d, WIDTH)
            nat.weight.copy_(layer.weight)
            nat.node_update.bias.copy_(layer.bias)
        elif model == "gat":
            hd = WIDTH // HEADS
            layer = gm.GATConv(d, hd, HEADS, negative_slope=0.01)  # the tutorial's F.leaky_relu default slope
            nat = nm.MultiHeadGATLayer(d, hd, HEADS)
            for k, head in enumerate(nat.heads):
                head.fc.weight.copy_(layer.fc.weight[k * hd : (k + 1) * hd])
                head.attn_fc.weight.copy_(layer.attn[k].unsqueeze(0))
        elif model == "gat_heads":
            hd = WIDTH // HEADS
            layer = gm.GATConv(d, hd, HEADS, negative_slope=0.01)  # F.leaky_relu's default slope
            nat = nm.MultiHeadViewGATLayer(d, hd, HEADS)
            nat.fc.weight.copy_(layer.fc.weight)
            nat.attn_l.copy_(layer.attn[:, :hd].unsqueeze(0))
            nat.attn_r.copy_(layer.attn[:, hd:].unsqueeze(0))
        elif model == "sage":
            layer = gm.SAGEConv(d, WIDTH, "mean")
            nat = nm.SAGEConv(d, WIDTH)  # fc(cat([h, h_N])): the layer's two weights side by side, its bias
            nat.fc.weight.copy_(torch.cat([layer.fc_self.weight, layer.fc_neigh.weight], dim=1))
            nat.fc.bias.copy_(layer.bias)
        elif model == "gin":
            nat = nm.GINLayer(d, WIDTH)
        elif model == "rgcn":
            layer = gm.RGCNConv(d, WIDTH, R, self_loop=False, bias=False)
            nat = nm.RGCNLayer(d, WIDTH, R)
            nat.weight.copy_(layer.weight)
        elif model == "rgat":
            layer = gm.RGATConv(d, WIDTH // HEADS, R, num_heads=HEADS)
            nat = nm.RGATLayer(d, WIDTH // HEADS, R, HEADS)
            nat.weight.copy_(layer.weight)
            nat.attn.copy_(layer.attn)
        elif model == "hgt":
            layer = gm.HGTConv(d, WIDTH, T, R, num_heads=HEADS, use_norm=False)
            nat = nm.HGTLayer(d, WIDTH, T, R, HEADS)
            for name in ("k", "q", "v", "a"):
                for t, lin in enumerate(getattr(nat, f"{name}_linears")):
                    lin.weight.copy_(getattr(layer, f"{name}_weight")[t].T)
                    lin.bias.copy_(getattr(layer, f"{name}_bias")[t])
            for name in ("relation_att", "relation_msg", "relation_pri", "skip"):
                getattr(nat, name).copy_(getattr(layer, name))
        else:
            raise KeyError(model)
    return layer, nat


def natural_graph(data):
    """The graph the natural layers run on: ``data.graph`` itself when homogeneous, else its homogeneous
    version (global node ids, user edge order) with relation ids, RGCN norms and node types."""
    import torch

    import gnnc

    g = data.graph
    if len(g.etypes) == 1 and len(g.ntypes) == 1:
        return g
    src, dst = g.find_edges()
    rel = g.edge_type_ids()
    n, R = g.num_nodes(), len(g.etypes)
    homo = gnnc.graph((src, dst), num_nodes=n)
    homo.edata["rel_type"] = rel
    key = dst * R + rel  # DGL's entity-classification norm: 1 / in-edges of the destination in the relation
    homo.edata["norm"] = torch.bincount(key, minlength=n * R)[key].float().reciprocal().unsqueeze(1)
    homo.ndata["ntype"] = g.node_type_ids()
    return homo


def _out(t):
    return t.flatten(1) if t.dim() == 3 else t


# ----------------------------------------------------------------------------- children
def _systems(model: str, data, names):
    """(gnnc layer, natural layer, name -> (graph, module, callable) for each system in ``names``). No two
    systems share parameters (eager runs a copy of the natural layer) or a graph object (features one leaves
    on its graph, and the graph's caches, are its own; a homogeneous graph is copied)."""
    import copy

    import gnnc

    layer, nat = build(model, data)
    out, used = {}, set()
    for name in names:
        if name == "layer":
            graph, module, fn = data.graph, layer, gnnc.compile(layer)
        elif name == "compiled":
            graph, module, fn = natural_graph(data), nat, gnnc.compile(nat)
        else:
            eager = copy.deepcopy(nat)
            graph, module, fn = natural_graph(data), eager, eager
        if id(graph) in used:
            graph = gnnc.graph(graph.find_edges(), num_nodes=graph.num_nodes())
        used.add(id(graph))
        out[name] = (graph, module, fn)
    return layer, nat, out


def _stepper(graph, x, module, fn, mode: str, fallbacks: list):
    """One call of ``fn`` on ``(graph, x)`` in ``mode`` (inference: a forward under ``no_grad``; training:
    zero_grad, forward, sum, backward, SGD step), recording ``FallbackWarning`` messages into ``fallbacks``."""
    import torch

    from gnnc.compiler.driver import FallbackWarning
    from harness.timing import SGD_LR

    def call():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FallbackWarning)
            out = fn(graph, x)
        for w in caught:
            if issubclass(w.category, FallbackWarning):
                msg = str(w.message).splitlines()[0][:300]
                if msg not in fallbacks:
                    fallbacks.append(msg)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out

    if mode == "inference":
        module.eval()

        def step():
            with torch.no_grad():
                call()

        return step
    module.train()
    opt = torch.optim.SGD(module.parameters(), lr=SGD_LR)

    def step():
        opt.zero_grad(set_to_none=True)
        _out(call()).sum().backward()
        opt.step()

    return step


def child(cfg: dict) -> None:
    """Run one child (``cfg['role']``) and append one JSON line per (system, mode) to ``cfg['result']``."""
    import torch

    torch.set_num_threads(cfg["threads"])
    from harness import datasets as hd  # (jit_runtime: numba started)

    data = hd.load_saved(Path(cfg["data_file"]))

    def emit(row):
        with open(cfg["result"], "a") as f:
            f.write(json.dumps(row) + "\n")

    (_time_child if cfg["role"] == "time" else _memory_child)(cfg, data, emit)


def _time_child(cfg: dict, data, emit) -> None:
    """Every system of ``cfg['systems']`` in one process, timed side by side: per mode, ``warmup`` calls of
    each, then ``repeat`` rounds of one call of each, so that the machine's drift reaches every system alike;
    the median per system. Each round times eager first, then, after one untimed call that absorbs the
    effect of eager's long, memory-hungry call (up to 1.2x on the next compiled call, GAT / pubmed training),
    the compiled systems in an order rotated every round."""
    import time as clock

    model, names = cfg["model"], cfg["systems"]
    _, _, systems = _systems(model, data, names)
    for mode in cfg["modes"]:
        fallbacks = {name: [] for name in names}
        steps, times, failed = {}, {name: [] for name in names}, {}
        for name, (graph, module, fn) in systems.items():
            steps[name] = _stepper(graph, data.x, module, fn, mode, fallbacks[name])

        def call(name, timed):
            start = clock.perf_counter()
            try:
                steps[name]()
            except Exception as exc:  # noqa: BLE001 - recorded, never a crash of the run
                failed[name] = f"{type(exc).__name__}: {exc}"[:500]
                return
            if timed:
                times[name].append(clock.perf_counter() - start)

        for round_ in range(-max(1, cfg["warmup"]), cfg["repeat"]):
            compiled = [n for n in names if n != "eager" and n not in failed]
            k = round_ % len(compiled) if compiled else 0
            order = compiled[k:] + compiled[:k]
            if "eager" in names and "eager" not in failed:
                call("eager", round_ >= 0)
                if order:
                    call(order[0], False)
            for name in order:
                call(name, round_ >= 0)
        for name in names:
            row = {
                "model": model,
                "dataset": cfg["dataset"],
                "system": name,
                "mode": mode,
                "role": "time",
                "fallbacks": fallbacks[name],
            }
            if name in failed:
                row.update(status="ERROR", error=failed[name])
            else:
                row.update(
                    status="ok", time_ms=1e3 * statistics.median(times[name]), times_ms=[1e3 * t for t in times[name]]
                )
            emit(row)


def _memory_child(cfg: dict, data, emit) -> None:
    """One system alone, its peak memory per mode with every large allocation mapped and unmapped by itself
    (``procfs.fix_mmap_threshold``: glibc's moving threshold otherwise keeps freed tensors in the heap, and
    one configuration's peak moved by 15 MiB between runs); then, for the compiled natural layer, ``check``."""
    import torch

    from harness import procfs
    from harness.timing import measure, settle

    procfs.fix_mmap_threshold()
    system, model = cfg["system"], cfg["model"]
    layer, nat, systems = _systems(model, data, [system])
    graph, module, fn = systems[system]
    initial = {k: v.clone() for k, v in module.state_dict().items()}
    fallbacks: list[str] = []
    libraries_mapped = procfs.map_file_pages()
    for mode in cfg["modes"]:
        row = {"model": model, "dataset": cfg["dataset"], "system": system, "mode": mode, "role": "memory"}
        try:
            step = _stepper(graph, data.x, module, fn, mode, fallbacks)
            before = settle()
            for _ in range(max(1, cfg["warmup"])):
                step()
            warm_peak = procfs.status_kib("VmHWM") - before
            settled = settle()
            times = measure(step, 0, cfg["repeat"], cfg["repeat"], 0.0)
            steady = procfs.status_kib("VmHWM") - settled
            row.update(
                status="ok",
                solo_time_ms=1e3 * statistics.median(times),
                peak_mib=max(warm_peak, settled - before + steady) / 1024,
                steady_peak_mib=steady / 1024,
                retained_mib=(settled - before) / 1024,
                libraries_mapped=libraries_mapped,
                fallbacks=list(fallbacks),
                threads=torch.get_num_threads(),
            )
        except Exception as exc:  # noqa: BLE001 - recorded, never a crash of the run
            row.update(
                status="ERROR",
                error=f"{type(exc).__name__}: {exc}"[:500],
                traceback=traceback.format_exc()[-3000:],
                fallbacks=list(fallbacks),
            )
            emit(row)
            continue
        if system == "compiled":
            module.load_state_dict(initial)
            try:
                row["check"] = check(model, mode, data, graph, nat, fn, layer)
            except Exception as exc:  # noqa: BLE001 - a failed check is the row's verdict
                row["check"] = {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "traceback": traceback.format_exc()[-3000:],
                }
            module.load_state_dict(initial)
        emit(row)


def check(model, mode, data, graph, nat, compiled, layer) -> dict:
    """Compiled natural == eager natural (output; in training also parameter gradients); eager natural ==
    gnnc's layer (eager) where they compute the same function."""
    import torch

    def run(fn, g):
        nat.zero_grad(set_to_none=True)
        if layer is not None:
            layer.zero_grad(set_to_none=True)
        if mode == "inference":
            with torch.no_grad():
                return _out(fn(g, data.x)), {}
        out = _out(fn(g, data.x))
        out.sum().backward()
        owner = nat if fn in (nat, compiled) else layer
        return out.detach(), {k: p.grad.clone() for k, p in owner.named_parameters() if p.grad is not None}

    import warnings as w

    from harness.equivalence import RTOL as HRTOL
    from harness.equivalence import error_ratio

    with w.catch_warnings():
        w.simplefilter("ignore")
        out_c, grad_c = run(compiled, graph)
    out_e, grad_e = run(nat, graph)
    res = {
        "max_abs_err": float((out_c - out_e).abs().max()) if out_c.numel() else 0.0,
        "out_err": error_ratio(out_c, out_e),
        "rtol": HRTOL,
        "scale": float(out_e.abs().max()) if out_e.numel() else 0.0,
    }
    res["out_allclose"] = res["out_err"] <= 1
    if mode == "training":
        errs = {k: error_ratio(grad_c[k], grad_e[k]) if k in grad_c else float("inf") for k in grad_e}
        res["grad_mismatch"] = [k for k, e in errs.items() if not e <= 1] + [k for k in grad_c if k not in grad_e]
        res["grad_err"] = max(errs.values(), default=0.0)
        res["grad_max_abs_err"] = max(
            (float((grad_c[k] - grad_e[k]).abs().max()) for k in grad_e if k in grad_c), default=0.0
        )
        if res["grad_mismatch"] and all(k in grad_c for k in res["grad_mismatch"]):
            res["float64"] = _float64_arbiter(nat, graph, data.x, res["grad_mismatch"], grad_c, grad_e)
            res["grad_mismatch"] = [k for k, v in res["float64"].items() if v["compiled"] > v["eager"]]
    if layer is not None:
        with torch.no_grad():
            ref = _out(layer(data.graph, data.x))
        res["vs_layer_max_abs_err"] = float((ref - out_e).abs().max())
        res["vs_layer_err"] = error_ratio(out_e, ref)
        res["vs_layer_allclose"] = res["vs_layer_err"] <= 1
    res["ok"] = res["out_allclose"] and not res.get("grad_mismatch") and res.get("vs_layer_allclose", True)
    return res


def _float64_arbiter(nat, graph, x, names, grad_c, grad_e) -> dict:
    """For float32 gradients that differ beyond tolerance (sums over millions of edges, cancelling), the
    distance of the compiled and of the eager float32 gradient to the eager float64 one: name -> errors.
    The compiled gradient passes when it is no farther from float64 than eager's own."""
    import copy

    nat64 = copy.deepcopy(nat).double()
    nat64.zero_grad(set_to_none=True)
    _out(nat64(graph, x.double())).sum().backward()
    exact = dict(nat64.named_parameters())
    return {
        k: {
            "compiled": float((grad_c[k].double() - exact[k].grad).abs().max()),
            "eager": float((grad_e[k].double() - exact[k].grad).abs().max()),
        }
        for k in names
    }


# ----------------------------------------------------------------------------- parent
def machine() -> dict:
    import torch

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "src"], cwd=HERE.parent, capture_output=True, text=True
            ).stdout.strip()
        )
    except OSError:
        commit, dirty = "?", False
    return {
        "nproc": os.cpu_count(),
        "loadavg": os.getloadavg(),
        "torch": torch.__version__,
        "commit": commit,
        "src_dirty": dirty,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def _cell(r, key="time_ms"):
    if r is None:
        return "—"
    if r["status"] != "ok":
        return f"**{r['status']}**"
    return _fmt(r[key], ".1f" if key == "time_ms" else ".0f")


def _ok(r) -> bool:
    return r is not None and r["status"] == "ok"


def _error_cell(check: dict, key: str, alt: str) -> str:
    """The error ``key`` as a multiple of the tolerance, else the absolute error ``alt``."""
    return f"{check[key]:.2g}x tol" if key in check else f"{check[alt]:.1e} abs"


def table(meta: dict, rows: list[dict]) -> str:
    by = {(r["model"], r["dataset"], r["mode"], r["system"]): r for r in rows}
    keys = []
    for r in rows:
        k = (r["model"], r["dataset"], r["mode"])
        if k not in keys:
            keys.append(k)
    load = ", ".join(f"{a:.2f}" for a in meta["loadavg_start"])
    load_end = ", ".join(f"{a:.2f}" for a in meta.get("loadavg_end", meta["loadavg_start"]))
    lines = [
        "# Natural UDFs compiled vs gnnc's layers vs eager",
        "",
        f"`{meta['command']}`",
        "",
        f"Machine: `nproc` = {meta['nproc']}, shared with other jobs (load average {load} at start, "
        f"{load_end} at the end); {meta['threads']} torch threads; torch {meta['torch']}; gnnc at "
        f"{meta['commit']}{' with uncommitted src/ changes of concurrent work' if meta['src_dirty'] else ''}; "
        f"{meta['date']}. Times: median of {meta['repeat']} calls after {meta['warmup']} warm-ups, all systems "
        f"of a row timed side by side in one subprocess (rounds of one call each: eager, an untimed call, then "
        f"layer and nat in rotated order). Memory: each "
        f"system in its own subprocess, every allocation over 128 KiB mapped by itself; peak = resident-set "
        f"high-water mark above the start of the mode (harness measure), MiB; steady = the same over the timed "
        f"calls only, above the resident set after the warm-ups (without the first call's tracing, planning and "
        f"kernel loading). {meta['timeout']} s limit per subprocess. Replica scale {meta['scale']}.",
        "",
        "layer = gnnc.models layer compiled; nat = natural UDF under `gnnc.compile`; eager = natural UDF uncompiled. "
        "nat/layer target <= 1.2, eager/nat target > 1. check: compiled natural vs eager natural (outputs, "
        "and parameter gradients in training) and, where marked, eager natural vs gnnc's layer.",
        "",
        "| model | dataset | mode | layer ms | nat ms | eager ms | layer MiB | nat MiB | eager MiB "
        "| nat/layer time | nat/layer mem | nat/layer steady mem | eager/nat | fell back | check |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    notes = []
    for model, ds, mode in keys:
        lay, nat, eag = (by.get((model, ds, mode, s)) for s in SYSTEMS)
        r1 = f"{nat['time_ms'] / lay['time_ms']:.2f}" if _ok(nat) and _ok(lay) else "—"
        m1 = f"{nat['peak_mib'] / lay['peak_mib']:.2f}" if _ok(nat) and _ok(lay) and lay["peak_mib"] > 0 else "—"
        m2 = (
            f"{nat['steady_peak_mib'] / lay['steady_peak_mib']:.2f}"
            if _ok(nat) and _ok(lay) and lay.get("steady_peak_mib", 0) > 0 and "steady_peak_mib" in nat
            else "—"
        )
        r2 = f"{eag['time_ms'] / nat['time_ms']:.2f}" if _ok(nat) and _ok(eag) else "—"
        fb = "—"
        if _ok(nat):
            fb = "no" if not nat["fallbacks"] else "**yes**: " + "; ".join(nat["fallbacks"]).replace("|", "\\|")
        chk = "—"
        if nat is not None and nat.get("check"):
            c = nat["check"]
            if "error" in c:
                chk = f"**ERROR** {c['error'][:120]}"
            else:
                parts = [
                    f"{'ok' if c['out_allclose'] else '**MISMATCH**'} ({_error_cell(c, 'out_err', 'max_abs_err')})"
                ]
                if c.get("grad_mismatch"):
                    parts.append(f"**grad MISMATCH** {','.join(c['grad_mismatch'])[:80]}")
                elif c.get("float64"):
                    worst = max(c["float64"].values(), key=lambda v: v["compiled"])
                    parts.append(
                        f"grads ok vs float64 (float32 {len(c['float64'])} beyond tol: compiled "
                        f"{worst['compiled']:.2g} abs from float64, eager {worst['eager']:.2g})"
                    )
                elif "grad_max_abs_err" in c:
                    parts.append(f"grads ok ({_error_cell(c, 'grad_err', 'grad_max_abs_err')})")
                if "vs_layer_allclose" in c:
                    parts.append(
                        f"= layer {'ok' if c['vs_layer_allclose'] else '**MISMATCH**'} "
                        f"({_error_cell(c, 'vs_layer_err', 'vs_layer_max_abs_err')})"
                    )
                chk = "; ".join(parts)
        lines.append(
            f"| {TITLES[model]} | {ds} | {mode} | {_cell(lay)} | {_cell(nat)} | {_cell(eag)} | "
            f"{_cell(lay, 'peak_mib')} | {_cell(nat, 'peak_mib')} | {_cell(eag, 'peak_mib')} | {r1} | {m1} | "
            f"{m2} | {r2} | {fb} | {chk} |"
        )
        for s, r in zip(SYSTEMS, (lay, nat, eag)):
            if r is not None and r["status"] != "ok":
                notes.append(f"- {TITLES[model]} / {ds} / {mode} / {s}: {r['status']}: {r.get('error', '')}")
    if notes:
        lines += ["", "Failures:", ""] + notes
    return "\n".join(lines) + "\n"


def merge(runs: list[Path], out: Path) -> int:
    """Write ``out``'s table and results from several runs' ``results.json`` (the first run's machine line,
    every run's command)."""
    loaded = [json.loads((run / "results.json").read_text()) for run in runs]
    rows: dict = {}
    for run in loaded:
        for r in run["rows"]:
            rows[(r["model"], r["dataset"], r["mode"], r["system"])] = r
    meta = dict(loaded[0]["meta"])
    meta["command"] = "`; then `".join(run["meta"]["command"] for run in loaded)
    meta["repeat"] = "/".join(str(run["meta"]["repeat"]) for run in loaded)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "runs": [run["meta"] for run in loaded], "rows": list(rows.values())}, indent=1)
    )
    (out / "table.md").write_text(table(meta, list(rows.values())))
    print(f"wrote {out / 'table.md'} and {out / 'results.json'}")
    return 0


def _run_child(cfg: dict, timeout: float) -> tuple[dict, dict]:
    """Run one child: ((system, mode) -> the row it wrote, the row standing for those it did not write)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(cfg["threads"])}
    status, err = "ERROR", "no result"
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(cfg)],
            env=env,
            timeout=timeout,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            err = f"exit {proc.returncode}: {proc.stderr[-800:]}"
    except subprocess.TimeoutExpired:
        status, err = "TIMEOUT", f"over {timeout:g} s"
    result = Path(cfg["result"])
    rows = [json.loads(line) for line in result.read_text().splitlines()] if result.exists() else []
    return {(r["system"], r["mode"]): r for r in rows}, {"status": status, "error": err}


def _combine(row: dict, role: str, got: dict) -> None:
    """Fold one child's row into the table's row: times from the side-by-side child, memory and the check
    from the memory child; the row is ok when both are."""
    if got["status"] != "ok":
        if row.get("status", "ok") == "ok":
            row.update(status=got["status"], error=f"{role}: {got.get('error', '')}")
        if "traceback" in got:
            row["traceback"] = got["traceback"]
        return
    row.setdefault("status", "ok")
    keep = (
        ("time_ms", "times_ms")
        if role == "time"
        else ("solo_time_ms", "peak_mib", "steady_peak_mib", "retained_mib", "libraries_mapped", "threads", "check")
    )
    row.update({k: got[k] for k in keep if k in got})
    row["fallbacks"] = list(dict.fromkeys(row.get("fallbacks", []) + got.get("fallbacks", [])))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5, help="timed calls (median), at least 5 for the table")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per subprocess")
    p.add_argument("--scale", type=float, default=1.0, help="replica scale (1 = published size)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=HERE / "results" / "natural")
    p.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="instead of running: one table of earlier runs' results (a later run's row replaces an "
        "earlier run's for the same model, dataset, mode and system)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    if args.merge:
        return merge(args.merge, args.out)

    from harness import datasets as hd

    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        **machine(),
        "command": "python bench/natural_udfs.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "threads": args.threads,
        "repeat": args.repeat,
        "warmup": args.warmup,
        "timeout": args.timeout,
        "scale": args.scale,
    }
    meta["loadavg_start"] = meta.pop("loadavg")
    rows: list[dict] = []

    def write():
        meta["loadavg_end"] = os.getloadavg()
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (args.out / "table.md").write_text(table(meta, rows))

    with tempfile.TemporaryDirectory(prefix="natural_udfs_") as tmp:
        for ds in args.datasets:
            models = [m for m in args.models if (m in HOMO_MODELS) == (ds in HOMO_DATASETS)]
            if not models:
                continue
            print(f"[{time.strftime('%H:%M:%S')}] building {ds} (scale {args.scale})", flush=True)
            data = hd.load(ds, False, args.seed, Path(tmp), args.scale)
            data_file = Path(tmp) / f"{ds}.pt"
            hd.save(data, data_file)
            del data
            for model in models:
                systems = [s for s in args.systems if s != "layer" or model in WITH_LAYER]
                done: dict = {}
                base = {
                    "model": model,
                    "dataset": ds,
                    "modes": args.modes,
                    "threads": args.threads,
                    "repeat": args.repeat,
                    "warmup": args.warmup,
                    "data_file": str(data_file),
                }
                children = [
                    (f"{system} memory", {**base, "role": "memory", "system": system}, [system]) for system in systems
                ]
                children.append(("time side by side", {**base, "role": "time", "systems": systems}, systems))
                for label, cfg, names in children:
                    cfg["result"] = str(Path(tmp) / f"{model}-{ds}-{label.replace(' ', '-')}.jsonl")
                    start = time.perf_counter()
                    wrote, missing = _run_child(cfg, args.timeout)
                    summary = []
                    for name in names:
                        for mode in args.modes:
                            got = wrote.get((name, mode), missing)
                            _combine(
                                done.setdefault(
                                    (name, mode), {"model": model, "dataset": ds, "system": name, "mode": mode}
                                ),
                                cfg["role"],
                                got,
                            )
                            shown = (
                                f"{got['time_ms']:.1f} ms"
                                if "time_ms" in got
                                else f"{got['peak_mib']:.0f} MiB"
                                if "peak_mib" in got
                                else got["status"]
                            )
                            summary.append(f"{name} {mode} {shown}")
                    summary = ", ".join(summary)
                    print(
                        f"[{time.strftime('%H:%M:%S')}] {model} {ds} {label}: {summary} "
                        f"({time.perf_counter() - start:.0f} s)",
                        flush=True,
                    )
                rows.extend(done.values())
                write()
    write()
    print(f"wrote {args.out / 'table.md'} and {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
