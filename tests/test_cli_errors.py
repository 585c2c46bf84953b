"""The ``gnnc`` command without surprises (issue 18): one-line failures with their fix, exit code 2, no traceback;
``--version``; help and defaults; the one data-location rule; ``gnnc datasets``; bench output as rows arrive."""

import argparse
import importlib.metadata
import json
import re
from pathlib import Path

import pytest

from gnnc import cli
from gnnc.data import paths
from gnnc.data.registry import PLANETOID_PARTS

REPO = Path(__file__).resolve().parents[1]


def run(argv, capsys) -> tuple[int, str, str]:
    """``gnnc argv`` in-process: (exit code, stdout, stderr)."""
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse exits by itself
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_failure(code, err, *named):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for text in named:
        assert text in lines[0], (text, lines[0])


# --------------------------------------------------------------- failures
FAILURES = [  # argv, then what the one line must name: the culprit and the fix
    (["info", "nosuch"], "'nosuch'", "gnnc datasets"),
    (["explain", "--graph", "nosuch"], "'nosuch'", "choose one of cora-replica, pubmed-replica"),
    (["explain", "--graph", "cora"], "'cora' means the real cora files", "say cora-replica"),
    (["train", "--minibatch", "--dataset", "nosuch"], "'nosuch'", "choose one of"),
    (["train", "--dataset", "pubmed"], "pubmed", "--minibatch"),
    (["train", "--minibatch", "--resume"], "--resume", "--checkpoint DIR"),
    (["train", "--minibatch", "--model", "gcn"], "not gcn", "drop --minibatch"),
    (["info", "cora", "--scale", "2"], "--scale", "(0, 1]"),
    (["explain", "--scale", "abc"], "'abc'", "--help"),
    (["demo", "--runs", "0"], "--runs", "at least 1"),
    (["partition", "mag", "--parts", "0", "--out", "x"], "--parts", "at least 1"),
    (["partition", "mag", "--parts", "2"], "--out", "gnnc partition --help"),
    (["nosuch-command"], "'nosuch-command'", "gnnc --help"),
    (["info", "missing-graph.npz"], "missing-graph.npz", "does not exist"),
]


@pytest.mark.parametrize("argv, culprit, fix", FAILURES, ids=[" ".join(f[0]) for f in FAILURES])
def test_each_failure_is_one_line_naming_culprit_and_fix(argv, culprit, fix, capsys):
    code, _, err = run(argv, capsys)
    assert_one_line_failure(code, err, culprit, fix)


def test_missing_data_folder_names_the_path_its_origin_and_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "nowhere"))
    code, _, err = run(["info", "cora"], capsys)
    assert_one_line_failure(code, err, str(tmp_path / "nowhere" / "planetoid"), "from $GNNC_DATA", "--data-dir")
    code, _, err = run(["train", "--data-dir", str(tmp_path), "--epochs", "1"], capsys)
    assert_one_line_failure(code, err, str(tmp_path / "planetoid"), "given explicitly", "GNNC_DATA")


def test_a_missing_output_folder_is_one_line(tmp_path, capsys):
    dot = tmp_path / "no" / "such" / "folder" / "g.dot"
    code, _, err = run(["explain", "--model", "gcn", "--scale", "0.02", "--dot", str(dot)], capsys)
    assert_one_line_failure(code, err, str(dot), "check the path")


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("something\ninside broke")

    parser = cli.build_parser

    def patched():
        p = parser()
        _commands(p)["datasets"].set_defaults(func=broken)
        return p

    monkeypatch.setattr(cli, "build_parser", patched)
    code, _, err = run(["datasets"], capsys)
    assert_one_line_failure(code, err, "RuntimeError: something inside broke", "--debug", "GNNC_DEBUG=1")
    with pytest.raises(RuntimeError):
        cli.main(["--debug", "datasets"])
    with pytest.raises(RuntimeError):
        cli.main(["datasets", "--debug"])
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(RuntimeError):
        cli.main(["datasets"])


def test_debug_reraises_usage_errors(capsys):
    with pytest.raises(cli.UsageError, match="nosuch"):
        cli.main(["info", "nosuch", "--debug"])


# --------------------------------------------------------- version and help
def test_version_comes_from_the_package_metadata(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"gnnc {importlib.metadata.version('gnnc')}"


def _commands(parser):
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_option_has_help_and_help_shows_defaults_and_the_data_rule(capsys):
    parser = cli.build_parser()
    for name, command in {"gnnc": parser, **_commands(parser)}.items():
        for action in command._actions:
            if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"gnnc {name}: {action.option_strings or action.dest} has no help"
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "$GNNC_DATA" in out and "../shared/data" in out and "~/.cache/gnnc/data" in out
    code, out, _ = run(["explain", "--help"], capsys)
    assert "(default: 0.05)" in " ".join(out.split()) and "(default: gat)" in out
    code, out, _ = run(["train", "--help"], capsys)
    assert "(default: 25 20)" in " ".join(out.split())


# ---------------------------------------------------------- data location
def test_the_data_location_rule_argument_then_env_then_checkout_then_user_cache(tmp_path, monkeypatch):
    given, env, checkout, cache = (tmp_path / n for n in ("given", "env", "checkout", "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv(paths.ENV_VAR, str(env))
    monkeypatch.setattr(paths, "CHECKOUT_DATA", checkout)
    checkout.mkdir()
    assert paths.data_root(given) == given and "given explicitly" in paths.describe_root(given)
    assert paths.data_root() == env and "$GNNC_DATA" in paths.describe_root()
    monkeypatch.delenv(paths.ENV_VAR)
    assert paths.data_root() == checkout and "checkout" in paths.describe_root()
    checkout.rmdir()  # the checkout's folder counts only when present
    assert paths.data_root() == cache / "gnnc" / "data" and "per-user" in paths.describe_root()
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert paths.data_root() == Path.home() / ".cache" / "gnnc" / "data"


def test_the_checkout_default_is_the_shared_data_beside_this_repository():
    assert paths.CHECKOUT_DATA == REPO.parent / "shared" / "data"


def test_resolve_errors_are_one_line_with_the_fix(no_default_data):
    with pytest.raises(paths.DataNotFoundError) as caught:
        paths.resolve(None, "planetoid", "Planetoid folder")
    message = str(caught.value)
    assert "\n" not in message and str(no_default_data / "planetoid") in message
    assert "per-user default" in message and "GNNC_DATA" in message and "--data-dir" in message


def test_tests_bench_and_cli_share_the_one_rule(tmp_path, monkeypatch):
    import sys

    from tests.conftest import data_dir

    sys.path.insert(0, str(REPO / "bench"))
    from harness.datasets import default_data_root

    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path))
    assert data_dir() == default_data_root() == paths.data_root() == tmp_path
    assert default_data_root(tmp_path / "x") == tmp_path / "x"
    # Nothing else reads $GNNC_DATA or spells out ../shared/data itself.
    pattern = re.compile(r"environ(\.get)?[\[(]\s*['\"]GNNC_DATA|['\"]shared['\"]\s*/\s*['\"]data['\"]")
    offenders = [
        str(f.relative_to(REPO))
        for folder in ("src", "tests", "bench")
        for f in (REPO / folder).rglob("*.py")
        if f.name not in ("paths.py", Path(__file__).name) and pattern.search(f.read_text())
    ]
    assert offenders == []


def _touch(root: Path, files):
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b"")


def test_datasets_lists_present_absent_and_incomplete_files(tmp_path, monkeypatch, capsys):
    _touch(tmp_path, [f"planetoid/ind.cora.{p}" for p in PLANETOID_PARTS])
    _touch(tmp_path, ["planetoid/ind.citeseer.x", "kg/WN18RR.tar.gz"])
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path))
    code, out, _ = run(["datasets"], capsys)
    assert code == 0 and f"files under {tmp_path} (from $GNNC_DATA)" in out
    state = {line.split()[0]: line for line in out.splitlines() if "gnnc.data.load_" in line}
    assert " found " in state["cora"] and " found " in state["WN18RR"] and " absent " in state["FB15k-237"]
    assert "incomplete, missing ind.citeseer.y" in state["citeseer"] and "ind.citeseer.x," not in state["citeseer"]
    code, out, _ = run(["datasets", "--data-dir", str(tmp_path / "empty")], capsys)
    assert out.count(" absent ") == 8 and "(given explicitly)" in out


# ------------------------------------------------ defaults said out loud
def test_info_reports_the_features_the_graph_has_and_its_scale(capsys):
    code, out, _ = run(["info", "aifb-replica", "--scale", "0.02"], capsys)
    assert code == 0 and "synthetic replica at scale 0.02 (2% of the published size)" in out
    assert "node features: none" not in out and re.search(r"feat float32 \[\d+, 64\]", out)
    assert re.search(r"label int64 \[\d+\], train_mask bool", out)


def test_explain_says_which_graph_and_scale_it_picked(capsys):
    code, out, err = run(["explain", "--model", "gcn", "--scale", "0.02"], capsys)
    assert code == 0 and "cora-replica: synthetic replica at scale 0.02" in out and not err


def test_minibatch_trains_cora_replica_and_refuses_the_bare_name_of_the_real_files(monkeypatch, capsys):
    from gnnc.cli import train

    calls = []
    monkeypatch.setattr(train, "run_minibatch", lambda dataset, **kw: calls.append((dataset, kw)) or 0)
    code, _, err = run(["train", "--minibatch", "--dataset", "cora"], capsys)
    assert code == 2 and not calls
    assert "'cora' means the real cora files, which gnnc train --minibatch does not read; say cora-replica" in err
    code, _, _ = run(["train", "--minibatch", "--dataset", "cora-replica"], capsys)
    assert code == 0 and calls[0][0] == "cora" and calls[0][1]["scale"] == 0.01


def test_partition_prints_its_scale_before_and_the_bytes_written_after(tmp_path, capsys):
    code, out, _ = run(["partition", "mag", "--scale", "0.001", "--parts", "2", "--out", str(tmp_path / "p")], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(
        "mag-replica: synthetic replica at scale 0.001 (0.1% of the published size), about 1,940"
    )
    assert re.search(rf"[\d.]+ MiB in {re.escape(str(tmp_path / 'p'))}$", lines[-1])


# ---------------------------------------------------- bench, row by row
def test_bench_writes_table_and_plots_after_every_row_and_survives_an_interrupt(tmp_path, monkeypatch, capsys):
    from gnnc.cli import bench as bench_cli

    assert bench_cli._harness_cli(bench_cli.bench_dir()) is not None
    from harness import machine, runner

    out = tmp_path / "results"
    timed = []

    def fake(task, cfg, timeout_s, mem_cap_bytes=None, device="cpu"):
        if task.__name__ != "time_config":
            return {"status": "ok"}
        timed.append(cfg["mode"])
        if len(timed) == 2:  # the first row is on disk, whole, before the second configuration starts
            assert "| eager |" in (out / "table.md").read_text()
            assert len(json.loads((out / "results.json").read_text())["runs"][-1]["rows"]) == 1
            raise KeyboardInterrupt
        return {"status": "ok", "time_ms": 1.5, "times_ms": [1.5], "peak_mib": 2.0}

    monkeypatch.setattr(runner, "run_in_subprocess", fake)
    monkeypatch.setattr(machine, "measure_rates", lambda device: {"copy_bytes_per_s": 1e9, "matmul_flops_per_s": 1e9})
    code, _, err = run(
        ["bench", "--quick", "--models", "gcn", "--datasets", "pubmed", "--systems", "eager", "--out", str(out)], capsys
    )
    assert code == 130 and err.strip().endswith("gnnc bench: interrupted")
    table = (out / "table.md").read_text()
    assert table.count("| eager |") == 1 and "| 1.5 |" in table
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["results.json", "table.md"] + (["inference.png"] if _has_matplotlib() else [])
    )


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401 - whether it imports
    except ImportError:
        return False
    return True
