"""Benchmark harness (bench/harness): the equivalence gate, runner rows and failures, the floor, `gnnc bench`."""
import argparse
import json
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.graphs import random_heterograph, random_homograph

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness import equivalence, floor, runner  # noqa: E402 - bench/ is not a package
from harness.case import Case, Prepared  # noqa: E402
from harness.datasets import BenchData  # noqa: E402
from harness.models import MODELS  # noqa: E402
from harness.pyg_models import PYG, PYG_FAST, Pairing  # noqa: E402
from harness.systems import SYSTEMS, System  # noqa: E402


def _case(model: str) -> Case:
    """``model`` on an awkward tiny graph (zero in-degrees, self loops, multi-edges, an empty relation)."""
    if MODELS[model].kind == "homogeneous":
        g, width = random_homograph(30, 120, seed=1), 12
    else:
        g, width = random_heterograph(seed=1), 64  # HGT's gated skip needs in == out
    x = torch.randn(g.num_nodes(), width, generator=torch.Generator().manual_seed(2))
    return Case.build(MODELS[model], BenchData("tiny", g, x, "test"), seed=0)


@pytest.mark.parametrize("system, model", [("pyg", m) for m in PYG] + [("pyg-fast", m) for m in PYG_FAST])
def test_every_pyg_pairing_computes_our_function(system, model):
    pytest.importorskip("torch_geometric")
    case = _case(model)
    verdict = equivalence.check(SYSTEMS["eager"].prepare(case), SYSTEMS[system].prepare(case), case.data.x,
                                gradients=True)
    assert verdict["status"] == "ok", verdict


def test_gate_catches_pygs_own_gcn_normalisation_on_a_directed_graph():
    nn = pytest.importorskip("torch_geometric.nn")
    case = _case("gcn")
    src, dst = case.data.graph.find_edges()
    conv = nn.GCNConv(12, 64, add_self_loops=False)  # normalize=True: in-degree at both ends
    with torch.no_grad():
        conv.lin.weight.copy_(case.eager.weight.T)
        conv.bias.copy_(case.eager.bias)
    mismatched = Prepared(conv, lambda x: conv(x, torch.stack([src, dst])), lambda out: out)
    verdict = equivalence.check(SYSTEMS["eager"].prepare(case), mismatched, case.data.x)
    assert verdict["status"] == "MISMATCH" and "outputs differ" in verdict["detail"]


def test_error_ratio_judges_small_entries_against_the_tensor_scale():
    expected = torch.tensor([100.0, 0.0])
    assert equivalence.error_ratio(torch.tensor([100.0, 0.009]), expected) < 1  # 0.009 <= 1e-4 * 100
    assert equivalence.error_ratio(torch.tensor([100.0, 0.011]), expected) > 1
    assert equivalence.error_ratio(torch.tensor([100.0]), expected) == float("inf")


def test_a_differs_pairing_is_marked_and_not_checked(monkeypatch):
    pairing = Pairing("SomeConv", lambda case: None, "note", differs="softmax per relation")
    monkeypatch.setitem(SYSTEMS, "other", System("other", "", lambda case: None, pairing=lambda m: pairing))
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager", "other"])
    verdicts, _ = runner.gate(settings, "gcn", "pubmed", ["eager", "other"])
    for mode in settings.modes:
        assert verdicts[mode] == {"other": {"status": "DIFFERS", "detail": "softmax per relation"}}


def test_runner_appends_a_json_row_with_its_fields(tmp_path):
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager"], modes=["inference"],
                               quick=True, warmup=1, runs=2, min_runs=2, budget_s=1.0, timeout_s=60.0,
                               data_root=str(tmp_path), scale=0.005, threads=1, command="test")
    runner.run(settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None)
    record = json.loads((tmp_path / "results.json").read_text())["runs"][-1]
    assert {"cpu", "cores", "torch", "gnnc", "git_commit"} <= set(record["machine"])
    assert record["rates"]["copy_bytes_per_s"] > 0 and record["rates"]["matmul_flops_per_s"] > 0
    (row,) = record["rows"]
    assert row["status"] == "ok", row
    assert (row["model"], row["dataset"], row["mode"], row["system"]) == ("gcn", "pubmed", "inference", "eager")
    assert len(row["times_ms"]) == 2 and row["time_ms"] == pytest.approx(sum(row["times_ms"]) / 2)
    assert row["peak_mib"] >= 0 and row["nodes"] == 99 and row["edges"] == 443
    w = floor.work("gcn", "inference", floor.Shape(**row["shape"]))
    assert (row["work_flops"], row["work_bytes"]) == (w.flops, w.bytes)
    assert row["x_floor"] == pytest.approx(row["time_ms"] / row["floor_ms"])


def test_a_configuration_past_its_timeout_is_recorded_not_raised():
    start = time.monotonic()
    assert runner.run_in_subprocess(time.sleep, 60, timeout_s=1.0)["status"] == "TIMEOUT"
    assert time.monotonic() - start < 30


def test_an_allocation_over_the_memory_cap_is_recorded_as_oom():
    result = runner.run_in_subprocess(torch.ones, 2**30, timeout_s=60.0, mem_cap_bytes=2**28)
    assert result["status"] == "OOM", result


def test_floor_of_a_gcn_layer_by_hand():
    s = floor.Shape(nodes=10, edges=30, relations=1, src_pairs=8, dst_pairs=9, in_dim=16, params=16 * 64 + 64)
    inference = floor.work("gcn", "inference", s)
    assert inference.flops == 2 * 10 * 16 * 64 + 30 + 2 * 30 * 64 == 24350  # x W, c_u c_v, scaled sum
    assert inference.bytes == 4 * (10 * 16 + 10 * 64 + 1088) + 4 * (11 + 30) == 7716  # x, out, params, CSR
    training = floor.work("gcn", "training", s)
    assert (training.flops, training.bytes) == (2 * 24350, 2 * 7716 + 16 * 1088)
    assert floor.floor_seconds(inference, {"copy_bytes_per_s": 1e3, "matmul_flops_per_s": 1e6}) == 7.716
    assert floor.floor_seconds(inference, {"copy_bytes_per_s": 1e9, "matmul_flops_per_s": 1e3}) == 24.35


def test_floor_shape_counts_distinct_source_and_destination_relation_pairs():
    import gnnc

    g = gnnc.heterograph({("a", "r", "a"): ([0, 0, 0], [0, 1, 2]), ("a", "s", "a"): ([1, 1], [0, 0])},
                         num_nodes={"a": 3})
    assert floor.shape_of(g, in_dim=4, params=7) == floor.Shape(3, 5, 2, src_pairs=2, dst_pairs=4, in_dim=4,
                                                                params=7)


def test_gnnc_bench_parses_its_options_and_explains_a_missing_bench_folder(monkeypatch, tmp_path):
    from gnnc import bench_cli

    def parse(argv):
        parser = argparse.ArgumentParser()
        bench_cli.add_bench_parser(parser.add_subparsers())
        return parser.parse_args(argv)

    args = parse(["bench", "--quick", "--models", "gcn", "rgcn", "--systems", "eager", "--out", "x"])
    assert args.quick and args.models == ["gcn", "rgcn"] and args.systems == ["eager"] and args.out == Path("x")
    monkeypatch.setattr(bench_cli, "bench_dir", lambda: tmp_path / "bench")
    args = parse(["bench", "--quick", "--models", "gcn"])
    with pytest.raises(SystemExit, match="not installed with the package"):
        args.func(args)
