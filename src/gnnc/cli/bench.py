"""``gnnc bench``: the benchmark suite of the repository's ``bench/`` folder.

``bench/`` is not part of the installed package: the command finds it next
to the source tree (``<repo>/src/gnnc/cli`` -> ``<repo>/bench``) and says so
clearly when it is absent, as in a wheel install.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .arguments import HelpFormatter


def bench_dir() -> Path:
    """``<repo>/bench`` for a source checkout (it may not exist)."""
    return Path(__file__).resolve().parents[3] / "bench"


def _harness_cli(folder: Path):
    """The harness's ``cli`` module from ``folder``, or None when ``folder`` holds no harness."""
    if not (folder / "harness" / "cli.py").is_file():
        return None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    from harness import cli

    return cli


def _missing(args):
    raise SystemExit(
        f"gnnc bench: the benchmark suite lives in the repository's bench/ folder, which is not "
        f"installed with the package (looked for {bench_dir() / 'harness'}). Run it from a "
        f"source checkout: git clone the gnnc repository, pip install -e '.[bench]', then "
        f"gnnc bench --quick"
    )


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to a ``gnnc`` subparsers object."""
    cli = _harness_cli(bench_dir())
    help_ = "benchmark models x datasets x systems (source checkout only)"
    if cli is None:
        # Without the harness the options are unknown: take every argument ('+' is no option prefix
        # here) so that the clear error below is what the user sees, not argparse's.
        p = subparsers.add_parser("bench", help=help_, prefix_chars="+", add_help=False)
        p.add_argument("ignored", nargs="*")
        p.set_defaults(func=_missing)
        return p
    p = subparsers.add_parser("bench", help=help_, description=cli.runner.__doc__, formatter_class=HelpFormatter)
    cli.add_arguments(p)
    p.set_defaults(func=lambda args: cli.run_and_report(args, shlex.join(["gnnc", *sys.argv[1:]])))
    return p
