"""The documentation builds without warnings and every example in it is true.

- ``sphinx -W --keep-going -b html``: the pages, the API reference from the docstrings and the CLI
  reference from the parser build with warnings as errors;
- ``sphinx -b doctest``: every Python example on every page runs and prints what the page shows;
- every shell command shown in docs/ and README.md is checked: ``gnnc`` command lines must parse with
  the installed parser (the quick ones, ``datasets`` / ``info`` / ``explain``, also run), ``pip install``
  extras must exist, named files must exist; a code block in any other language fails the test;
- README.md's example runs, and its two set-up commands are the ones CI and the docs use.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="the docs need the dev extra: pip install -e '.[dev]'")
pytest.importorskip("myst_parser", reason="the docs need the dev extra: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SOURCES = sorted(p for p in DOCS.rglob("*") if p.suffix in (".rst", ".md") and "_build" not in p.parts)

# Quick subcommands that really run when a page shows them; the rest (demo, train, bench, partition) only parse.
RUN = {"datasets", "info", "explain"}
SHELL_LANGUAGES = {"console", "bash", "shell", "sh"}


def _sphinx(builder: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            builder,
            str(DOCS),
            str(out / builder),
            "-d",
            str(out / f"doctrees-{builder}"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_html_builds_without_warnings(tmp_path):
    run = _sphinx("html", tmp_path)
    assert run.returncode == 0, f"sphinx html failed:\n{run.stdout}\n{run.stderr}"
    for page in ["index", "quickstart", "tutorial", "hetero", "compiler", "cli", "benchmarks", "api/index"]:
        assert (tmp_path / "html" / f"{page}.html").is_file(), page
    cli = (tmp_path / "html" / "cli.html").read_text()
    assert "gnnc explain" in cli and "--model" in cli  # generated from the parser


def test_every_python_example_runs(tmp_path):
    run = _sphinx("doctest", tmp_path)
    report = tmp_path / "doctest" / "output.txt"
    text = report.read_text() if report.exists() else ""
    assert run.returncode == 0, f"doctest failed:\n{text}\n{run.stdout}\n{run.stderr}"
    counts = [int(n) for n in re.findall(r"^\s*(\d+) tests in", text, re.M)]
    assert sum(counts) >= 40, text  # the examples were found and run, not skipped


# ------------------------------------------------------------------ code blocks other than doctests
def _blocks(path: Path):
    """(language, text) of every literal code block of a .rst or .md page (doctest blocks excluded)."""
    text = path.read_text()
    if path.suffix == ".md":
        for lang, body in re.findall(r"^```([^\n`]*)\n(.*?)^```", text, re.M | re.S):
            if not lang.startswith("{include}"):
                yield lang.strip() or "(none)", body
        return
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)\.\. (code-block|code|sourcecode|doctest|testcode|testoutput)::\s*(\S*)", line)
        literal = re.search(r"(^|[^:]):: *$", line) and not line.lstrip().startswith("..")
        if not m and not literal:
            continue
        indent = len(m.group(1)) if m else len(line) - len(line.lstrip())
        body = []
        for nxt in lines[i + 1 :]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        if m and m.group(2) in ("doctest", "testcode", "testoutput"):
            continue
        yield (m.group(3) or "(none)") if m else "(literal ::)", "\n".join(body)


def _commands(body: str):
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        elif line.startswith("#") or not line:
            continue
        line = line.split(" #")[0].strip()
        for part in line.split("&&"):
            yield part.strip()


def _extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the keys of [project.optional-dependencies]
        section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        return set(re.findall(r"^([A-Za-z][\w-]*)\s*=", section, re.M))
    return set(tomllib.loads(text)["project"]["optional-dependencies"])


def _check_command(cmd: str, where: str) -> None:
    from gnnc.cli import build_parser

    words = shlex.split(cmd)
    while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefix
        words.pop(0)
    prog, args = words[0], words[1:]
    if prog == "gnnc":
        try:
            build_parser().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{where}: `{cmd}` does not parse with gnnc's parser (exit {exc.code})")
        if args[0] in RUN and "download" not in args:  # a download would need the network
            from gnnc.cli import main

            with contextlib.redirect_stdout(io.StringIO()):
                assert main(args) in (0, None), f"{where}: `{cmd}` failed"
    elif prog == "pip":
        assert args[0] == "install", f"{where}: {cmd}"
        extras = _extras()
        for arg in args[1:]:
            m = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
            for extra in m.group(1).split(",") if m else []:
                assert extra in extras, f"{where}: `{cmd}` names extra {extra!r}, not in pyproject.toml"
    elif prog == "python":
        if args[:2] == ["-m", "sphinx"]:
            assert (ROOT / args[-2] / "conf.py").is_file(), f"{where}: `{cmd}`"
        else:
            assert args and (ROOT / args[0]).is_file(), f"{where}: `{cmd}` names a file that does not exist"
    elif prog == "pytest":
        pass
    else:
        pytest.fail(f"{where}: `{cmd}`: no check for the command {prog!r}; add one to tests/test_docs.py")


def test_every_other_code_block_is_checked():
    """Doctests run above; shell blocks are checked here; the rest must be a diagram or listing (``text``)."""
    checked = 0
    for path in SOURCES + [README]:
        for lang, body in _blocks(path):
            where = str(path.relative_to(ROOT))
            if lang in SHELL_LANGUAGES:
                for cmd in _commands(body):
                    _check_command(cmd, where)
                    checked += 1
            elif lang == "python" and path == README:
                continue  # run by test_readme_example_runs
            else:
                assert lang == "text", f"{where}: a {lang} block is neither run nor checked; make it a doctest"
    assert checked >= 15


def test_readme_example_runs_and_setup_commands_hold():
    text = README.read_text()
    examples = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    assert len(examples) == 1, "README.md: one Python example"
    assert len(examples[0].strip().splitlines()) <= 15, "README.md: keep the example to 15 lines"
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(examples[0], str(README), "exec"), {"__name__": "readme_example"})  # noqa: S102 - the README's example
    assert "pip install -e . && gnnc demo" in text
    assert 'pip install -e ".[dev]" && pytest -q' in text
    for page in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / page).is_file(), f"README.md links to {page}, which does not exist"
