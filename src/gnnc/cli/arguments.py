"""What every ``gnnc`` command shares: the usage error, the parser and help format, the argparse number types,
the common option texts and the device check."""

from __future__ import annotations

import argparse
import textwrap

import torch


class UsageError(Exception):
    """A failure the user can fix: ``main`` prints its one-line message (culprit and fix), exit code 2."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions wrapped line by line (their line breaks kept); every option's default appended unless its
    help already states one."""

    def _fill_text(self, text, width, indent):
        lines = []
        for line in text.splitlines():
            lead = indent + line[: len(line) - len(line.lstrip())]
            lines.append(textwrap.fill(line.strip(), width, initial_indent=lead, subsequent_indent=lead) or "")
        return "\n".join(lines)

    def _get_help_string(self, action):
        help_ = action.help or ""
        if (
            any(action.default is v for v in (None, False, argparse.SUPPRESS))
            or "default" in help_
            or not action.option_strings
        ):
            return help_
        default = " ".join(map(str, action.default)) if isinstance(action.default, list) else "%(default)s"
        return f"{help_} (default: {default})"


class Parser(argparse.ArgumentParser):
    """argparse with ``HelpFormatter`` and one-line errors that point at ``--help``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def number(kind, low, high=None, low_open=False):
    """An argparse type: ``kind`` within [low, high] (``low_open``: above low); the message says the range."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if value < low or (low_open and value == low) or (high is not None and value > high):
            bound = (
                f"in ({low:g}, {high:g}]"
                if low_open and high is not None
                else f"above {low:g}"
                if low_open
                else f"at least {low:g}"
                if high is None
                else f"in [{low:g}, {high:g}]"
            )
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be {bound}")
        return value

    parse.__name__ = kind.__name__
    return parse


SCALE = number(float, 0.0, 1.0, low_open=True)
POSITIVE = number(int, 1)
NON_NEGATIVE = number(int, 0)
POSITIVE_FLOAT = number(float, 0.0, low_open=True)
DEBUG_ENV = "GNNC_DEBUG"
COMPILE_ENV = "GNNC_COMPILE"
QUIET_HELP = "no progress bars or per-epoch lines, results and errors only (also TQDM_DISABLE=1)"
DATA_DIR_HELP = (
    "the data folder, holding planetoid/, kg/, rdf/ (default: $GNNC_DATA, else ../shared/data, else ~/.cache/gnnc/data)"
)


def require_device(device: str) -> None:
    """UsageError unless ``device`` can run here: a CUDA device needs ``torch.cuda.is_available()``."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"--device {device} needs an NVIDIA GPU, but torch.cuda.is_available() is False here "
            f"(torch {torch.__version__})"
        )
