"""Benchmark peers (bench/harness): DGL in its own interpreter and PyG under torch.compile, gated like the rest.

Tests marked ``real_peer`` use the environment bench/peer_env.py builds
(DGL 2.1 on torch 2.2) and are skipped without it. The others run without
it: the peer interpreter is faked by this one (the ``dgl`` module replaced
by a stub where a layer is built), so the export, the launch, the verdict
and the gate on the DGL path are covered everywhere.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.test_bench_harness import _case  # the awkward tiny graphs every pairing is checked on

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness import dgl_models, equivalence, peer, runner, worker  # bench/ is no package
from harness.case import Case
from harness.models import HIDDEN, MODELS
from harness.systems import SYSTEMS

BENCH = Path(__file__).resolve().parents[1] / "bench"

real_peer = pytest.mark.skipif(peer.peer_python() is None, reason=f"no peer environment ({peer.BUILD_COMMAND})")


def _oracle(case: Case, path: Path, modes=("inference", "training")) -> None:
    eager = SYSTEMS["eager"].prepare(case)
    x = equivalence.check_input(case.data.x, 0)
    equivalence.save_oracle({m: equivalence.evaluate(eager, x, 0, m == "training") for m in modes}, path)


def _gate_on_peer(
    system: str, model: str, tmp_path: Path, monkeypatch, mode: str | None = None, modes=("inference", "training")
) -> tuple[dict, dict]:
    """Export a tiny case, run ``system`` in the peer interpreter (timed in ``mode`` when given), judge its
    outputs with ``worker.peer_verdict``; (peer result, verdicts)."""
    case = _case(model)
    monkeypatch.setattr(worker, "_case", lambda cfg: case)  # the gate's retries rebuild this case
    _oracle(case, tmp_path / "oracle.pt", modes)
    peer.export_case(case, tmp_path / "case.npz", 0, HIDDEN)
    cfg = {
        "system": system,
        "model": model,
        "dataset": "tiny",
        "seed": 0,
        "threads": 1,
        "warmup": 1,
        "runs": 2,
        "min_runs": 2,
        "budget_s": 0.1,
        "peer_file": str(tmp_path / "case.npz"),
        "mode": mode,
        "outputs_file": str(tmp_path / "outputs.npz"),
        "check_modes": list(modes),
    }
    res = peer.run_config(cfg, 300, None, tmp_path)
    if res["status"] != "ok":
        return res, {}
    judged = worker.peer_verdict({**cfg, "oracle_file": str(tmp_path / "oracle.pt"), "modes": list(modes)})
    return res, judged["verdicts"]


# ---------------------------------------------------------------------------------------------- without DGL


def test_an_exported_case_loads_back_with_its_graph_parameters_and_check_points(tmp_path):
    case = _case("hgt")
    peer.export_case(case, tmp_path / "case.npz", 0, HIDDEN)
    b = dgl_models.Bundle.load(tmp_path / "case.npz")
    g = case.data.graph
    src, dst = g.find_edges()
    assert b.model == "hgt" and b.num_nodes == g.num_nodes() and b.num_rels == len(g.etypes) == 5
    assert torch.equal(b.src, src) and torch.equal(b.dst, dst) and torch.equal(b.etype, g.edge_type_ids())
    assert b.num_ntypes == 3 and torch.equal(b.x, case.data.x)
    assert set(b.params) == set(case.eager.state_dict())
    assert all(torch.equal(b.params[k], v) for k, v in case.eager.state_dict().items())
    # HGT's view compares the rows of node types some relation points to
    assert torch.equal(b.view_rows, MODELS["hgt"].view(torch.arange(g.num_nodes()).unsqueeze(1), case.data)[:, 0])
    # the check points and upstream gradients are the ones the oracle uses
    assert torch.equal(b.arrays["check_x.0"], equivalence.check_input(case.data.x, 0))
    assert torch.equal(b.arrays["check_x.1"], equivalence.check_input(case.data.x, equivalence.RETRY_SEED_STEP))
    assert torch.equal(b.arrays["upstream.0"], equivalence.upstream_gradient((b.view_rows.numel(), HIDDEN), 0))


@pytest.mark.parametrize("model", list(MODELS))
def test_the_udf_layer_rebuilt_from_parameters_is_the_eager_layer(model):
    """dgl-udf rebuilds our layer in the peer from its parameters alone: same class, settings and weights."""
    import gnnc.models as gm

    case = _case(model)
    layer = dgl_models.udf_layer(model, case.eager.state_dict(), gm)
    assert type(layer) is type(case.eager)
    plain = {k: v for k, v in vars(case.eager).items() if not k.startswith("_") and k != "training"}
    assert {k: v for k, v in vars(layer).items() if k in plain} == plain
    assert [(n, type(m)) for n, m in layer.named_modules()] == [(n, type(m)) for n, m in case.eager.named_modules()]


def test_the_peer_loads_gnnc_layer_files_without_gnnc(tmp_path):
    """Where gnnc is not importable (the peer's torch), the layer files load on their own."""
    script = (
        f"import sys; sys.modules['gnnc'] = None; sys.path.insert(0, {str(BENCH)!r})\n"
        "from harness import dgl_models\n"
        "gm = dgl_models.gnnc_models()\n"
        "assert gm.__name__ == '_gnnc_peer.models', gm\n"
        "print(gm.HGTConv(8, 8, 2, 3, num_heads=2).relation_att.shape)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "torch.Size([3, 2, 4, 4])"


def test_the_peer_side_of_the_harness_imports_no_gnnc():
    script = (
        f"import sys; sys.modules['gnnc'] = None; sys.path.insert(0, {str(BENCH)!r})\n"
        "import harness.peer_worker, harness.timing, harness.equivalence, harness.dgl_models\n"
        "assert not any(m == 'gnnc' or m.startswith('gnnc.') for m in sys.modules if sys.modules[m])"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def _fake_peer_env(monkeypatch, tmp_path: Path, stub_dgl: str) -> None:
    """A peer environment whose interpreter is this one, with ``stub_dgl`` as its ``dgl`` module."""
    env = tmp_path / "peer-venv"
    (env / "bin").mkdir(parents=True)
    site = tmp_path / "stub-site"
    (site / "dgl").mkdir(parents=True)
    (site / "dgl" / "__init__.py").write_text(stub_dgl)
    launcher = env / "bin" / "python"
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={site}:$PYTHONPATH exec {sys.executable} "$@"\n')
    launcher.chmod(0o755)
    (env / peer.STAMP).write_text(json.dumps({"dgl": "stub", "torch": torch.__version__}))
    monkeypatch.setenv("GNNC_PEER_ENV", str(env))


def _stub_builders(body: str) -> str:
    """A ``dgl`` stub whose import patches ``dgl_models.BUILDERS`` (the fake peer cannot build real layers)."""
    return (
        "__version__ = 'stub'\n"
        "import torch\n"
        "from harness import dgl_models\n"
        "from harness.case import Prepared\n"
        "import gnnc.models as gm\n" + body
    )


GNNC_GRAPH = (
    "def _graph(b):\n"
    "    import gnnc\n"
    "    if b.num_rels == 1 and b.num_ntypes == 1:\n"
    "        return gnnc.graph((b.src, b.dst), num_nodes=b.num_nodes)\n"
    "    counts = torch.bincount(b.ntype, minlength=b.num_ntypes)\n"
    "    starts = torch.cumsum(counts, 0) - counts\n"
    "    data = {}\n"
    "    for r, (s, d) in enumerate(zip(b.rel_src_type.tolist(), b.rel_dst_type.tolist())):\n"
    "        m = b.etype == r\n"
    "        data[(f'n{s:03d}', f'r{r:04d}', f'n{d:03d}')] = (b.src[m] - starts[s], b.dst[m] - starts[d])\n"
    "    return gnnc.heterograph(data, num_nodes={f'n{t:03d}': int(c) for t, c in enumerate(counts)})\n"
)


def _eager_builder(call: str) -> str:
    """A stub whose 'DGL' systems are the eager layer itself on a gnnc graph rebuilt from the bundle."""
    return _stub_builders(
        GNNC_GRAPH + "def _build(b):\n"
        "    layer = dgl_models.udf_layer(b.model, b.params, gm)\n"
        "    g = _graph(b)\n"
        f"    return Prepared(layer, lambda x: {call}, lambda out: out.flatten(1)[b.view_rows])\n"
        "dgl_models.BUILDERS.update({'dgl': _build, 'dgl-udf': _build})\n"
    )


EAGER_AS_PEER = _eager_builder("layer(g, x, *b.inputs)")
WRONG_PEER = _eager_builder("1.01 * layer(g, x, *b.inputs)")


def test_a_faked_peer_computing_our_function_passes_the_gate_and_is_timed(monkeypatch, tmp_path):
    _fake_peer_env(monkeypatch, tmp_path, EAGER_AS_PEER)
    res, verdicts = _gate_on_peer("dgl", "gat", tmp_path, monkeypatch, mode="training")
    assert res["status"] == "ok", res
    assert res["peer"]["dgl"] == "stub" and len(res["times_ms"]) == 2 and res["peak_mib"] >= 0
    assert res["first_call_ms"] > 0
    for mode in ("inference", "training"):
        assert verdicts[mode]["status"] == "ok" and verdicts[mode]["output_err"] <= 1, verdicts
    assert verdicts["training"]["grad_err"] <= 1


def test_a_faked_peer_computing_another_function_is_a_mismatch(monkeypatch, tmp_path):
    _fake_peer_env(monkeypatch, tmp_path, WRONG_PEER)
    res, verdicts = _gate_on_peer("dgl", "gcn", tmp_path, monkeypatch)
    assert res["status"] == "ok", res
    assert verdicts["inference"]["status"] == "MISMATCH" and "outputs differ" in verdicts["inference"]["detail"]
    assert verdicts["training"] == verdicts["inference"]  # later modes are not judged after a failure


def test_a_peer_that_fails_reports_the_error(monkeypatch, tmp_path):
    _fake_peer_env(
        monkeypatch,
        tmp_path,
        _stub_builders(
            "def _build(b):\n    raise ValueError('no such layer here')\ndgl_models.BUILDERS['dgl'] = _build\n"
        ),
    )
    res, _ = _gate_on_peer("dgl", "gcn", tmp_path, monkeypatch)
    assert res["status"] == "ERROR" and "no such layer here" in res["error"]


def test_a_peer_past_the_timeout_is_killed(monkeypatch, tmp_path):
    _fake_peer_env(monkeypatch, tmp_path, "import time\ntime.sleep(60)\n")
    case = _case("gcn")
    peer.export_case(case, tmp_path / "case.npz", 0, HIDDEN)
    cfg = {
        "system": "dgl",
        "model": "gcn",
        "dataset": "tiny",
        "mode": None,
        "peer_file": str(tmp_path / "case.npz"),
        "outputs_file": None,
        "check_modes": [],
    }
    assert peer.run_config(cfg, 3, None, tmp_path)["status"] == "TIMEOUT"


def test_the_runner_gates_a_peer_system_after_timing_and_drops_a_mismatch(monkeypatch, tmp_path):
    """The whole path through ``runner.run``: export, peer timing, verdict in a harness subprocess."""
    _fake_peer_env(monkeypatch, tmp_path, WRONG_PEER)
    settings = runner.Settings(
        models=["gcn"],
        datasets=["pubmed"],
        systems=["eager", "dgl"],
        modes=["inference"],
        quick=True,
        warmup=1,
        runs=2,
        min_runs=2,
        budget_s=0.5,
        timeout_s=120.0,
        data_root=str(tmp_path),
        scale=0.005,
        threads=1,
        command="test",
    )
    runner.run(settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None)
    record = json.loads((tmp_path / "results.json").read_text())["runs"][-1]
    eager, dgl = record["rows"]
    assert eager["status"] == "ok"
    assert dgl["status"] == "MISMATCH" and dgl["check"]["checked_at"] == "run size", dgl
    assert not set(runner.UNTIMED_FIELDS) & set(dgl)
    assert record["machine"]["peer"]["dgl"] == "stub" and record["systems"]["dgl"]["peer"] is True
    assert {p["system"] for p in record["pairings"]} == {"dgl"}


def test_the_runner_times_a_faked_peer_that_passes(monkeypatch, tmp_path):
    _fake_peer_env(monkeypatch, tmp_path, EAGER_AS_PEER)
    settings = runner.Settings(
        models=["rgcn"],
        datasets=["aifb"],
        systems=["eager", "dgl-udf"],
        modes=["training"],
        quick=True,
        warmup=1,
        runs=2,
        min_runs=2,
        budget_s=0.5,
        timeout_s=120.0,
        data_root=str(tmp_path),
        scale=0.02,
        threads=1,
        command="test",
    )
    runner.run(settings, runner.ResultsFile(tmp_path / "results.json"), log=lambda line: None)
    _, row = json.loads((tmp_path / "results.json").read_text())["runs"][-1]["rows"]
    assert row["status"] == "ok" and row["check"]["status"] == "ok", row
    assert len(row["times_ms"]) == 2 and row["nodes"] > 0


def test_a_missing_peer_environment_stops_the_run_with_the_build_command(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNC_PEER_ENV", str(tmp_path / "nothing-here"))
    settings = runner.Settings(models=["gcn"], datasets=["pubmed"], systems=["eager", "dgl"])
    with pytest.raises(SystemExit) as stop:
        runner.validate(settings)
    message = str(stop.value)
    assert "\n" not in message and "'dgl'" in message and "python bench/peer_env.py" in message


def test_gnnc_bench_without_the_peer_environment_names_the_command(monkeypatch, tmp_path):
    from harness import cli

    monkeypatch.setenv("GNNC_PEER_ENV", str(tmp_path / "nothing-here"))
    with pytest.raises(SystemExit) as stop:
        cli.main(
            [
                "--quick",
                "--models",
                "gcn",
                "--datasets",
                "pubmed",
                "--systems",
                "dgl-udf",
                "--out",
                str(tmp_path / "out"),
            ]
        )
    assert "python bench/peer_env.py" in str(stop.value)


def test_every_model_has_a_dgl_pairing_and_a_udf_form_with_notes():
    for system in ("dgl", "dgl-udf"):
        for model in MODELS:
            pairing = SYSTEMS[system].pairing(model)
            assert pairing is not None and pairing.note, (system, model)
    differ = {m for m in MODELS if SYSTEMS["dgl"].pairing(m).differs}
    assert differ == {"rgat", "hgt"}
    assert not any(SYSTEMS["dgl-udf"].pairing(m).differs for m in MODELS)


# ---------------------------------------------------------------------------------------------- pyg-compile


def test_pyg_under_torch_compile_computes_our_function(monkeypatch, tmp_path):
    pytest.importorskip("torch_geometric")
    if SYSTEMS["pyg-compile"].available():
        pytest.skip(SYSTEMS["pyg-compile"].available())
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    case = _case("gcn")
    verdict = equivalence.check(
        SYSTEMS["eager"].prepare(case), SYSTEMS["pyg-compile"].prepare(case), case.data.x, gradients=True
    )
    assert verdict["status"] == "ok", verdict


# ---------------------------------------------------------------------------------------------- real DGL


@real_peer
@pytest.mark.parametrize("system, model", [("dgl", m) for m in MODELS] + [("dgl-udf", m) for m in MODELS])
def test_every_dgl_pairing_computes_our_function_or_says_it_differs(system, model, tmp_path, monkeypatch):
    res, verdicts = _gate_on_peer(system, model, tmp_path, monkeypatch)
    assert res["status"] == "ok", res
    assert res["peer"]["dgl"].startswith("2.")
    differs = SYSTEMS[system].pairing(model).differs
    if differs:  # reported as differing: the gate must indeed see another function
        assert verdicts["inference"]["status"] == "MISMATCH", verdicts
    else:
        for mode in ("inference", "training"):
            assert verdicts[mode]["status"] == "ok", verdicts


@real_peer
def test_a_real_peer_configuration_is_timed_and_gated(tmp_path, monkeypatch):
    res, verdicts = _gate_on_peer("dgl", "gcn", tmp_path, monkeypatch, mode="training", modes=("training",))
    assert res["status"] == "ok" and len(res["times_ms"]) == 2 and res["peer"]["torch"].startswith("2.2")
    assert verdicts["training"]["status"] == "ok", verdicts
