"""bench/dgl_tests.py on a stand-in DGL test tree: outcomes classified, compiled plans counted, report written
(compiled mode only: eager mode differs by the plugin's wrapper alone)."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from harness.dgl_report import classify  # bench/ is no package

REPO = Path(__file__).resolve().parents[1]

_TESTS = """
import dgl
import dgl.function as fn
import pytest
import torch


def test_update_all():
    g = dgl.graph(([0, 1], [1, 2]))
    g.ndata["h"] = torch.ones(3, 2)
    g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
    assert g.ndata["h"].tolist() == [[0, 0], [1, 1], [1, 1]]


def test_missing_api():
    dgl.no_such_api()


@pytest.mark.skip(reason="Need gpu for this test")
def test_gpu():
    pass


@pytest.mark.skip(reason="too slow for DGL's CI")
def test_dgl_skip():
    pass
"""


def test_harness_classifies_and_counts_compiled_plans(tmp_path):
    common = tmp_path / "dgl" / "tests" / "python" / "common"
    common.mkdir(parents=True)
    (common / "test_standin.py").write_text(_TESTS)
    (common / "test_broken.py").write_text(
        "import dgl.no_such_module\n\n\ndef test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    )
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "dgl_tests.py"),
            "--dgl-tests",
            str(tmp_path / "dgl"),
            "--mode",
            "compiled",
            "--files",
            "python/common/test_standin.py",
            "python/common/test_broken.py",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    results = json.loads((out / "results.json").read_text())
    tests = results["files"]["python/common/test_standin.py"]["compiled"]["tests"]
    assert {name: t["category"] for name, t in tests.items()} == {
        "test_update_all": "passed",
        "test_missing_api": "failed",
        "test_gpu": "n/a",
        "test_dgl_skip": "skipped",
    }
    assert "no_such_api" in tests["test_missing_api"]["reason"] and tests["test_gpu"]["reason"] == "GPU only"
    assert tests["test_update_all"]["compiled_plans"] >= 1 and not tests["test_update_all"]["fallbacks"]
    broken = results["files"]["python/common/test_broken.py"]["compiled"]
    [record] = broken["tests"].values()
    assert broken["status"] == "ok" and record["tests"] == 2 and "dgl.no_such_module" in record["reason"]
    readme = (out / "README.md").read_text()
    assert "| `test_standin.py` | 1 | 1 | 1 | 1 | 0 | 1 | 0 |" in readme
    assert "| `test_broken.py` | 0 | 2 | 0 | 0 | 0 | 0 | 0 |" in readme


def test_a_sample_runs_the_same_few_parametrizations_of_each_test_and_counts_the_rest(tmp_path):
    common = tmp_path / "dgl" / "tests" / "python" / "common"
    common.mkdir(parents=True)
    (common / "test_many.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('k', range(5))\n"
        "def test_k(k):\n    pass\n\n\ndef test_one():\n    pass\n"
    )

    def ran(out):
        subprocess.run(
            [
                sys.executable,
                str(REPO / "bench" / "dgl_tests.py"),
                "--dgl-tests",
                str(tmp_path / "dgl"),
                "--mode",
                "eager",
                "--sample",
                "2",
                "--files",
                "python/common/test_many.py",
                "--out",
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        tests = json.loads((out / "results.json").read_text())["files"]["python/common/test_many.py"]["eager"]
        return {name: t["category"] for name, t in tests["tests"].items()}

    first = ran(tmp_path / "a")
    assert sorted(first.values()) == ["not run"] * 3 + ["passed"] * 3 and first["test_one"] == "passed"
    assert ran(tmp_path / "b") == first
    assert "| `test_many.py` | 3 | 0 | 0 | 0 | 3 |" in (tmp_path / "a" / "README.md").read_text()


def test_k_runs_only_the_tests_it_matches(tmp_path):
    common = tmp_path / "dgl" / "tests" / "python" / "common"
    common.mkdir(parents=True)
    (common / "test_two.py").write_text("def test_kept():\n    pass\n\n\ndef test_other():\n    pass\n")
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(REPO / "bench" / "dgl_tests.py"), "--dgl-tests", str(tmp_path / "dgl"), "--mode", "eager"]
        + ["-k", "kept", "--files", "python/common/test_two.py", "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    tests = json.loads((out / "results.json").read_text())["files"]["python/common/test_two.py"]["eager"]["tests"]
    assert list(tests) == ["test_kept"]
    assert "Only the tests `-k kept` matches ran" in (out / "README.md").read_text()


def test_dgl_nn_modules_that_are_not_layers_are_not_applicable_and_other_missing_modules_fail():
    def category(message):
        return classify("python/pytorch/nn/test_nn.py", {"nodeid": "test_x", "outcome": "failed", "message": message})

    for name in ("GNNExplainer", "HeteroPGExplainer", "SubgraphX", "explain", "DeepWalk", "MetaPath2Vec"):
        kind, reason = category(f"AttributeError: module 'gnnc.nn' has no attribute '{name}'")
        assert kind == "n/a" and "not message-passing layers" in reason
    assert category("AttributeError: module 'gnnc.nn' has no attribute 'GraphConv'")[0] == "failed"
    assert category("AttributeError: 'Graph' object has no attribute 'explain'")[0] == "failed"
