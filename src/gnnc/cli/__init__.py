"""The ``gnnc`` command: demo, datasets, info, train, explain, partition, bench (one module each; this one
assembles the parser and runs ``main``).

Real data (cora, citeseer, FB15k-237, WN18RR) is found by the rule of
``gnnc.data.paths``: ``--data-dir``, else ``$GNNC_DATA``, else
``../shared/data`` beside a source checkout, else ``~/.cache/gnnc/data``.
A graph name means the real files for cora/citeseer/FB15k-237/WN18RR in
every command; their synthetic replicas are named as such (``cora-replica``,
``gnnc.data.replicas``), and commands that build one say so, with its scale
and size. Every failure is one line on stderr naming the culprit and the
fix, exit code 2; ``--debug`` or ``GNNC_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import progress
from . import bench, datasets, demo, explain, info, partition, train
from .arguments import DEBUG_ENV, QUIET_HELP, Parser, UsageError

__all__ = ["DEBUG_ENV", "UsageError", "build_parser", "main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gnnc")
    except PackageNotFoundError:
        from .. import __version__

        return f"{__version__} (not installed)"


RULE_LINES = "\n  ".join(
    (
        "--data-dir DIR",
        "$GNNC_DATA",
        "../shared/data beside a source checkout, when present",
        "~/.cache/gnnc/data ($XDG_CACHE_HOME/gnnc/data), the per-user default",
    )
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gnnc",
        description="GNN UDF compiler: compile message-passing UDFs; demos, datasets, "
        "training, partitioning and benchmarks.",
        epilog=f"real data (cora, citeseer, FB15k-237, WN18RR) is read from the first of:\n  {RULE_LINES}\n"
        f"failures print one line and exit with code 2; --debug or {DEBUG_ENV}=1 shows the traceback",
    )
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print gnnc's version and exit"
    )
    p.add_argument("--debug", action="store_true", help=f"show the traceback of a failure (also {DEBUG_ENV}=1)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (demo, datasets, info, train, explain, partition, bench):
        command.add_parser(sub)
    for command in sub.choices.values():
        if command.prefix_chars == "-":  # the stand-in bench parser of a wheel install takes anything
            command.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help=f"show the traceback of a failure (also {DEBUG_ENV}=1)",
            )
            if "--quiet" not in command._option_string_actions:  # bench's harness has its own
                command.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p


def _one_line(text) -> str:
    return " ".join(str(text).split())


def main(argv=None) -> int:
    """Run ``gnnc``; a failure is one line on stderr and exit code 2 (the traceback with --debug / GNNC_DEBUG=1)."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    progress.set_quiet(args.quiet)
    prog = f"gnnc {args.command}"
    try:
        return args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exit_:  # a message from code that exits itself (the bench harness)
        if debug or exit_.code is None or isinstance(exit_.code, int):
            raise
        message = _one_line(exit_.code)
        print(message if message.startswith("gnnc") else f"{prog}: error: {message}", file=sys.stderr)
        return 2
    except (UsageError, OSError) as err:
        if debug:
            raise
        if isinstance(err, OSError) and err.filename and err.strerror:  # as open() raises it: add the fix
            err = f"{err.filename}: {err.strerror}; check the path (its folder must exist) and its permissions"
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:  # a CLI prints one line; --debug shows the rest
        if debug:
            raise
        text = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(
            f"{prog}: error: {type(err).__name__}: {_one_line(text)} (rerun with --debug or {DEBUG_ENV}=1 "
            f"for the traceback)",
            file=sys.stderr,
        )
        return 2
