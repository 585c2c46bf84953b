"""The DGL test table (``bench/dgl_tests.py``): each test classified, ``results.json`` and ``README.md``.

A test is ``passed``; ``failed`` (a failure or an error in setup or teardown, with its first error line);
``n/a`` with a reason: skipped by DGL for want of a GPU, skipped by DGL as another backend's, or listed in
``EXCLUDED`` (what gnnc deliberately does not have) and not passing, or failing for want of one of the
``dgl.nn`` modules that are not message-passing layers (``_NOT_LAYER_MODULES``); or ``skipped`` with DGL's own reason.
A module that cannot be collected is one ``failed`` record, counted once per test function of its file.
``not run``: left out of a sampled run (``bench/dgl_tests.py --sample``).
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

_GPU = re.compile(r"gpu|cuda|\buva\b", re.IGNORECASE)
_OTHER_BACKEND = re.compile(r"mxnet|tensorflow|\btf\b", re.IGNORECASE)

_FORMATS = (
    "DGL's sparse-format switch (g.formats(), create_formats_()): gnnc builds the per-relation "
    "structures its kernels need itself and has no format to choose"
)
_GRAPH_INDEX = (
    "DGL's C++ graph index (g._graph: a HeteroGraphIndex with its own formats, metagraph object and "
    "per-type-id queries): gnnc's structure is its GraphIndex; the public API the test reaches through it "
    "(is_unibipartite, reverse) is gnnc's"
)
_LAZY_FRAMES = (
    "DGL's lazy feature frames (g._node_frames[t]._columns[k].storage holding the parent's rows until "
    "first read): gnnc's features are plain tensors, taken when the subgraph is made"
)
_WHOLE_GRAPH_CALL = (
    "gnnc's whole-graph heterogeneous call: update_all / apply_edges / apply_nodes without etype "
    "(ntype) on a graph of several relations run the UDF over every relation (typed UDFs reading "
    "edges.srctype / edges.type: docs/hetero.rst), where DGL raises DGLError; the test expects that "
    "error (the rest of the test passes in both modes with those checks left out)"
)
_NOT_LAYERS = (
    "DGL's explainability tools and random-walk embedding trainers (dgl.nn's GNNExplainer, "
    "HeteroGNNExplainer, PGExplainer, HeteroPGExplainer, SubgraphX, HeteroSubgraphX, dgl.nn.explain, "
    "DeepWalk, MetaPath2Vec): not message-passing layers, which is what gnnc.nn provides"
)
# a failure that names one of these modules as missing from gnnc.nn (the alias's dgl.nn) is _NOT_LAYERS
_NOT_LAYER_MODULES = re.compile(
    r"module 'gnnc\.nn' has no attribute '(GNNExplainer|HeteroGNNExplainer|PGExplainer|HeteroPGExplainer|"
    r"SubgraphX|HeteroSubgraphX|explain|DeepWalk|MetaPath2Vec)'"
)
# (file, test function) -> why gnnc deliberately lacks what the test exercises
EXCLUDED: dict[tuple[str, str], str] = {
    ("python/common/test_heterograph.py", "test_graph_index_is_unibipartite"): _GRAPH_INDEX,
    ("python/common/test_heterograph.py", "test_reverse"): _GRAPH_INDEX,
    ("python/common/test_heterograph.py", "test_frame"): _LAZY_FRAMES,
    ("python/common/test_heterograph.py", "test_format"): _FORMATS,
    ("python/common/test_heterograph.py", "test_apply"): _WHOLE_GRAPH_CALL,
    ("python/common/test_heterograph.py", "test_level2"): _WHOLE_GRAPH_CALL,
    ("python/common/test_heterograph.py", "test_forking_pickler"): _FORMATS,  # formats made in another process
    ("python/common/test_heterograph-misc.py", "test_formats"): _FORMATS,
    ("python/common/transforms/test_transform.py", "test_line_graph2"): _FORMATS,  # line graphs of .formats(...)
    ("python/common/test_batch-heterograph.py", "test_slice_batch"): _FORMATS,  # slices bg.formats(...) graphs
    # its last block takes subgraphs of dgl.graph(...).formats(fmt) graphs; every check before it passes
    ("python/common/test_subgraph.py", "test_subgraph1"): _FORMATS,
    # its bfloat16 copy_u_sum runs on g.formats(["csc"]); tests/test_ops.py checks it with DGL's bound
    ("python/common/ops/test_ops.py", "test_half_spmm"): _FORMATS,
}


def name_in_file(nodeid: str) -> str:
    """The test's name in its file (``test_f[idtype0]``), whatever rootdir pytest reported it under."""
    return nodeid.partition("::")[2] or nodeid


def classify(rel: str, record: dict) -> tuple[str, str]:
    """(category, reason or error line) of one test record of file ``rel``."""
    outcome, message = record["outcome"], record.get("message", "")
    if outcome == "passed":
        return "passed", ""
    if outcome == "sampled out":
        return "not run", "left out of the sample (--sample)"
    if outcome == "skipped":
        if _GPU.search(message):
            return "n/a", "GPU only"
        if _OTHER_BACKEND.search(message):
            return "n/a", "another backend's"
        return "skipped", message
    excluded = EXCLUDED.get((rel, name_in_file(record["nodeid"]).partition("[")[0]))
    if excluded:
        return "n/a", excluded
    if _NOT_LAYER_MODULES.search(message):
        return "n/a", _NOT_LAYERS
    return "failed", message if outcome != "collection error" else f"collection error: {message}"


# failure lines that name a DGL API gnnc lacks -> that API
_MISSING = [
    (re.compile(r"module 'dgl' has no attribute '(\w+)'"), "dgl.{}"),
    (re.compile(r"No module named '(dgl[\w.]*)'"), "{}"),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), "{1}.{0}"),
    (re.compile(r"'(\w+)' object has no attribute '(\w+)'"), "{}.{}"),
    (re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'"), "{}({}=...)"),
]


def cause(message: str) -> str:
    """A failure line made comparable across tests: the missing API it names, else the line with addresses
    masked and cut to 160 characters."""
    for pattern, api in _MISSING:
        found = pattern.search(message)
        if found:
            whole_file = " (a collection error: the whole file)" if message.startswith("collection error") else ""
            return f"missing `{api.format(*found.groups())}`{whole_file}"
    return re.sub(r"0x[0-9a-f]+", "0x…", message)[:160]


def _tally(results: dict) -> dict:
    """file -> mode -> {status, seconds, tests, counts}: every record classified and counted (a collection
    error counts as many failures as its file has test functions)."""
    table = {}
    for rel, modes in results["files"].items():
        table[rel] = {}
        for mode, run in modes.items():
            tests, counts = {}, collections.Counter()
            for record in run["records"]:
                category, reason = classify(rel, record)
                tests[name_in_file(record["nodeid"])] = {**record, "category": category, "reason": reason}
                counts[category] += record.get("tests", 1)
                if mode == "compiled":
                    counts["ran a compiled plan"] += record.get("compiled_plans", 0) > 0
                    counts["fell back"] += bool(record.get("fallbacks"))
            table[rel][mode] = {"status": run["status"], "seconds": run["seconds"], "tests": tests, "counts": counts}
    return table


_CATEGORIES = ("passed", "failed", "n/a", "skipped", "not run")
_COMPILED_ONLY = ("ran a compiled plan", "fell back")


def _columns(names) -> list[tuple[str, str]]:
    return [(mode, col) for mode in names for col in _CATEGORIES + (_COMPILED_ONLY if mode == "compiled" else ())]


def _grouped(table: dict, mode: str, category: str) -> collections.Counter:
    counter = collections.Counter()
    for modes in table.values():
        for t in modes.get(mode, {}).get("tests", {}).values():
            if t["category"] == category:
                counter[cause(t["reason"])] += t.get("tests", 1)
    return counter


def _counter_lines(counter: collections.Counter, limit: int | None = None) -> list[str]:
    return [f"- {n} × {reason}" for reason, n in counter.most_common(limit)] or ["- none"]


def render(results: dict, table: dict) -> str:
    names = results["modes"]
    columns = _columns(names)
    lines = [
        f"# DGL 2.1.0's tests against gnnc at {results['commit']}",
        "",
        f"    {results['command']}",
        "",
        (
            f"DGL's tests from `{results['dgl_tests']}`, one pytest process per file and mode, run through "
            f"`gnnc.compat.dgl` (bench/dgl_tests.py); {results['seconds']:.0f} s in all. *compiled*: every "
            "message-passing call of a test runs under `compiling({})`; *ran a compiled plan*: tests in which "
            "at least one call ran a compiled plan; *fell back*: tests in which a call raised a "
            "`FallbackWarning` (it then ran eagerly). A file that fails to collect counts each of its test "
            "functions as one failure (its parametrizations are unknown)."
            + (
                f" A sample: at most {results['sample']} parametrizations of each test function ran (the same "
                "ones every time); the rest count as *not run*."
                if results.get("sample")
                else ""
            )
            + (
                f" Only the tests `-k {results['select']}` matches ran: a partial table."
                if results.get("select")
                else ""
            )
        ),
        "",
        "| file | " + " | ".join(f"{mode} {col}" for mode, col in columns) + " | notes |",
        "|---|" + "--:|" * len(columns) + "---|",
    ]
    total = collections.Counter()
    for rel, modes in table.items():
        cells = [str(modes[mode]["counts"][col]) if mode in modes else "" for mode, col in columns]
        total.update({(mode, col): modes[mode]["counts"][col] for mode, col in columns if mode in modes})
        notes = [f"{mode}: {run['status']}" for mode, run in modes.items() if run["status"] != "ok"]
        notes += sorted(
            {t["reason"] for run in modes.values() for t in run["tests"].values() if t["outcome"] == "collection error"}
        )
        lines.append(
            f"| `{rel.removeprefix('python/common/')}` | " + " | ".join(cells) + " | " + "; ".join(notes) + " |"
        )
    lines += ["| **total** | " + " | ".join(f"**{total[c]}**" for c in columns) + " | |", ""]
    for mode in names:
        lines += [
            f"## Not applicable ({mode})",
            "",
            *_counter_lines(_grouped(table, mode, "n/a")),
            "",
            f"## Skipped by DGL itself ({mode})",
            "",
            *_counter_lines(_grouped(table, mode, "skipped")),
            "",
            f"## Top failure causes ({mode}): failed tests, by the API missing or the first error line",
            "",
            *_counter_lines(_grouped(table, mode, "failed"), 40),
            "",
        ]
    if "compiled" in names and "eager" in names:
        lines += _compiled_sections(table)
    return "\n".join(lines)


def _compiled_sections(table: dict) -> list[str]:
    only_compiled, through_fallback, fallbacks = [], [], collections.Counter()
    for rel, modes in table.items():
        if "compiled" not in modes or "eager" not in modes:
            continue
        eager = modes["eager"]["tests"]
        for name, test in modes["compiled"]["tests"].items():
            fallbacks.update(cause(f) for f in test.get("fallbacks", ()))
            passed_eagerly = eager.get(name, {}).get("category") == "passed"
            if passed_eagerly and test["category"] == "failed":
                only_compiled.append(f"- `{rel}::{name}`: {cause(test['reason'])}")
            elif test["category"] == "passed" and test.get("fallbacks") and not test.get("compiled_plans"):
                through_fallback.append(f"- `{rel}::{name}`: {cause(test['fallbacks'][0])}")
    return [
        "## Pass eagerly, fail compiled",
        "",
        *(only_compiled or ["- none"]),
        "",
        "## Passed compiled only through a fallback (no compiled plan ran)",
        "",
        *(through_fallback or ["- none"]),
        "",
        "## Fallback causes (compiled): FallbackWarnings, by first line",
        "",
        *_counter_lines(fallbacks, 30),
        "",
    ]


def write_report(results: dict, out: Path) -> None:
    """``results.json`` (runs and every classified test) and ``README.md`` in ``out``."""
    table = _tally(results)
    files = {
        rel: {mode: {k: v for k, v in run.items() if k != "counts"} for mode, run in modes.items()}
        for rel, modes in table.items()
    }
    (out / "results.json").write_text(json.dumps({**results, "files": files}, indent=1) + "\n")
    (out / "README.md").write_text(render(results, table))
