"""The zoo bench (bench/harness/zoo.py): the graphs, the peers' parameter names, which systems the gate lets
through, the table's cells, and one small layer wired end to end on the gate's graph.

The end-to-end tests run world code from ``../shared/world-code`` (skipped without it); the DGL runs need
the peer environment bench/peer_env.py builds (skipped without it).
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness import peer, world_gate, zoo, zoo_peers  # bench/ is no package
from harness.world_programs import BY_NAME, N, load_shape

WORLD_CODE = Path(__file__).resolve().parents[2] / "shared" / "world-code"
needs_world_code = pytest.mark.skipif(not WORLD_CODE.is_dir(), reason=f"no world code at {WORLD_CODE}")
real_peer = pytest.mark.skipif(peer.peer_python() is None, reason=f"no peer environment ({peer.BUILD_COMMAND})")


def test_zoo_spans_twelve_layers_of_five_projects():
    assert len(zoo.ZOO) >= 12 and len(set(zoo.ZOO)) == len(zoo.ZOO)
    assert len({BY_NAME[n].project for n in zoo.ZOO}) >= 5
    assert all(p.program in BY_NAME and p.system in zoo_peers.SYSTEMS for p in zoo_peers.PEERS)


def test_empty_neighbourhoods_get_one_self_loop_each():
    src, dst = zoo.fill_empty_neighbourhoods(np.array([0, 1, 1]), np.array([1, 1, 0]), 4)
    assert src.tolist() == [0, 1, 1, 2, 3] and dst.tolist() == [1, 1, 0, 2, 3]


def test_gate_graph_has_no_empty_neighbourhood_and_keeps_multi_edges(tmp_path):
    shape = load_shape(zoo.gate_graph(tmp_path / "gate-graph.npz"))
    assert shape.nodes == N and shape.width == 8
    assert (np.bincount(shape.dst, minlength=N) > 0).all()
    pairs = shape.src * N + shape.dst
    assert np.unique(pairs).size < pairs.size  # multi-edges stay: the gate's awkward cases
    src, dst = shape.edges(np.random.RandomState(0), self_loops=True)
    assert src.numel() == shape.src.size + N and torch.equal(src[-N:], torch.arange(N))


def test_peer_names_map_both_ways_and_skip_unused_parameters():
    gated = zoo_peers.BY_PROGRAM_SYSTEM[("gatedgcn", "dgl-builtin")]
    assert gated.peer_name("bn_node_h.weight") == "bn_node.weight"
    assert gated.program_name("bn_edge.running_mean") == "bn_node_e.running_mean"
    gin = zoo_peers.BY_PROGRAM_SYSTEM[("gin-plain", "pyg")]
    assert gin.peer_name("apply_func.mlp.linears.0.weight") == "nn.0.mlp.linears.0.weight"
    assert gin.peer_name("bn_node_h.weight") is None  # the program leaves its batch norm unused
    with pytest.raises(KeyError, match="bias"):
        gin.program_name("bias")


def test_only_what_matches_is_timed():
    ok = {"dgl": "ok", "gnnc": "match", "gnnc-compiled": "match, fell back", "pyg": "mismatch: max |diff| 1"}
    assert zoo.to_time("x", ok) == ["gnnc", "dgl", "gnnc-compiled"]
    assert zoo.to_time("x", {**ok, "gnnc": "mismatch: max |diff| 1"}) == []
    assert zoo.to_time("x", {**ok, "dgl": "error: boom"}) == []
    assert zoo.to_time("x", {**ok, "dgl-builtin": "match"}) == ["gnnc", "dgl", "gnnc-compiled", "dgl-builtin"]


def _row(**over):
    timing = {m: {"time_ms": 10.0, "peak_mib": 5.0} for m in zoo.MODES}
    row = {
        "program": "gatedgcn",
        "project": "benchmarking-gnns",
        "peers": {"dgl-builtin": "GatedGCNConv"},
        "verdicts": {"gnnc": "match", "dgl": "ok", "gnnc-compiled": "match", "dgl-builtin": "match"},
        "compiled_plans": 2,
        "fallbacks": [],
        "timings": {
            "gnnc": {"status": "ok", **timing},
            "dgl": {"status": "ok", **{m: {"time_ms": 40.0, "peak_mib": 9.0} for m in zoo.MODES}},
            "gnnc-compiled": {"status": "ok", **timing},
            "dgl-builtin": {"status": "ok", **{m: {"time_ms": 8.0, "peak_mib": 4.0} for m in zoo.MODES}},
        },
    }
    return {**row, **over}


def test_table_cells_say_ratio_peer_and_path():
    row = _row()
    assert zoo.ratio(row, "dgl", "training") == "0.25x"
    assert zoo.peer_cell(row, "dgl-builtin") == "1.25x / 1.25x (GatedGCNConv)"
    assert zoo.peer_cell(row, "pyg") == "none"
    assert zoo.peer_cell({**row, "peers": {}}, "dgl-builtin") == "no built-in"
    assert zoo.path_cell(row) == "lowered"
    fell = _row(fallbacks=["gnnc could not compile this call"], verdicts={**row["verdicts"], "gnnc-compiled": "match"})
    assert zoo.path_cell(fell).startswith("**fell back**: gnnc could not compile")
    timed_fell = _row()
    timed_fell["timings"]["gnnc-compiled"].update(compiled_plans=0, fallbacks=["float32: no kernel"])
    assert zoo.path_cell(timed_fell) == "**fell back**: float32: no kernel"
    wrong = _row(verdicts={**row["verdicts"], "dgl-builtin": "mismatch: max |diff| 0.3 at 0.out.0"})
    assert zoo.peer_cell(wrong, "dgl-builtin") == "GatedGCNConv: not timed (mismatch: max |diff| 0.3 at 0.out.0)"
    assert zoo.peak_cell(row) == "5 / 5 / 9 / 4 / -"  # compiled, eager, DGL, built-in, PyG
    assert "| gatedgcn | 10.0 / 10.0 | 10.0 / 10.0 | 40.0 / 40.0 | 8.0 / 8.0 | - |" in zoo.table({"rows": [row]})


def _gate_and_time(name: str, tmp_path: Path, systems) -> tuple[dict, dict]:
    graph = zoo.gate_graph(tmp_path / "gate-graph.npz")
    runs = {s: world_gate.run(s, name, WORLD_CODE, tmp_path, 300, graph) for s in systems}
    cfg = {
        "world_code": str(WORLD_CODE),
        "graph": str(graph),
        "modes": list(zoo.MODES),
        "threads": 1,
        "warmup": 1,
        "runs": 2,
        "min_runs": 2,
        "budget_s": 0.0,
        "state": str(tmp_path / "timing-state.npz"),
    }
    return runs, {s: zoo.timed(s, name, cfg, tmp_path, 300) for s in systems}


@needs_world_code
def test_gin_row_wires_gnnc_eager_compiled_and_pyg(tmp_path):
    """GIN through the alias, eager and compiled, and PyG's GINConv with its parameters: the same numbers
    (the eager run is the oracle here), each timed in both modes, the compiled one with a plan run."""
    runs, timings = _gate_and_time("gin-plain", tmp_path, ("gnnc", "gnnc-compiled", "pyg"))
    for system in ("gnnc-compiled", "pyg"):
        assert world_gate.verdict(runs[system], runs["gnnc"], 1e-6, 1e-9) == "match", system
    assert runs["gnnc-compiled"]["compiled_plans"] > 0 and not runs["gnnc-compiled"]["fallbacks"]
    for system, t in timings.items():
        assert t["status"] == "ok", t
        assert all(t[m]["time_ms"] > 0 and len(t[m]["times_ms"]) == 2 for m in zoo.MODES)
    assert timings["gnnc-compiled"]["compiled_plans"] > 0 and timings["gnnc-compiled"]["fallbacks"] == []


@needs_world_code
@real_peer
def test_gatedgcn_row_gates_the_builtin_against_dgl_running_the_same_code(tmp_path):
    gated = zoo.gate("gatedgcn", WORLD_CODE, tmp_path, 300)
    assert gated["verdicts"] == {"gnnc": "match", "gnnc-compiled": "match", "dgl-builtin": "match", "dgl": "ok"}
    runs, timings = _gate_and_time("gatedgcn", tmp_path, ("gnnc", "dgl-builtin"))
    assert timings["dgl-builtin"]["status"] == "ok", timings["dgl-builtin"]
