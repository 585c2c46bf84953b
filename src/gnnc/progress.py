"""How gnnc shows progress: a tqdm bar on a terminal, plain lines elsewhere, nothing when quiet.

Quiet after ``set_quiet(True)`` (``gnnc --quiet``) or with ``TQDM_DISABLE`` set (to anything but "", "0"
or "false", as tqdm reads it). Bars appear only when stderr is a terminal: piped or logged output gets
``line`` calls (one per epoch, say) instead of carriage-return updates. Bars and lines go to stderr unless
a caller names stdout for per-epoch results.
"""

from __future__ import annotations

import os
import sys

from tqdm import tqdm

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or restore) every bar and line of this process; child processes inherit it (``TQDM_DISABLE``)."""
    global _quiet
    _quiet = quiet
    if quiet:
        os.environ["TQDM_DISABLE"] = "1"


def quiet() -> bool:
    """Whether progress output is off (``set_quiet`` or ``TQDM_DISABLE``)."""
    return _quiet or os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false")


def bars() -> bool:
    """Whether a progress bar may be drawn: not quiet, and stderr is a terminal."""
    return not quiet() and sys.stderr.isatty()


class NoBar:
    """What ``bar`` gives where no bar is drawn: iterates, and takes tqdm's updates as no-ops.

    Not a disabled tqdm: every tqdm, even disabled, creates tqdm's multiprocessing lock, a named semaphore
    that a subprocess ending by ``os._exit`` (as multiprocessing's children do) never unregisters, so the
    parent's resource_tracker warned of "leaked semaphore objects" once per benchmark subprocess.
    """

    disable = True

    def __init__(self, iterable=None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix(self, *args, **kwargs):
        pass

    def set_description(self, *args, **kwargs):
        pass

    def close(self):
        pass


def bar(iterable=None, disable: bool = False, **kwargs):
    """``tqdm(iterable, **kwargs)`` where ``bars()`` is true (and not ``disable``), else a ``NoBar``."""
    if disable or not bars():
        return NoBar(iterable)
    return tqdm(iterable, **kwargs)


def line(text: str, file=None) -> None:
    """One line of progress on ``file`` (default stderr), printed above a bar, unless quiet."""
    if not quiet():
        tqdm.write(text, file=file or sys.stderr)
