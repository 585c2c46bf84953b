"""torch's logged warnings in a benchmark subprocess, caught for the report instead of printed.

``pyg-compile`` runs PyG's layers under ``torch.compile``, and dynamo logs a warning for each graph break
it meets in PyG's code (``int(tensor.max())`` in RGCNConv: "Graph break from `Tensor.item()`", with the
source lines), once per configuration: 30 blocks of text in one ``gnnc bench --quick``. They are the peer's,
not the run's: each subprocess keeps the messages, its row carries them (``torch_warnings``), and the report
counts them in one line (``summary``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Iterator


class _Recorder(logging.Handler):
    def __init__(self, messages: list[str]):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _printing_handlers() -> list[tuple[logging.Logger, logging.Handler]]:
    """The stream handlers torch's logging set up (``torch._logging``: one per registered logger)."""
    return [
        (logger, handler)
        for name, logger in logging.root.manager.loggerDict.items()
        if (name == "torch" or name.startswith("torch.")) and isinstance(logger, logging.Logger)
        for handler in logger.handlers
        if type(handler) is logging.StreamHandler
    ]


@contextlib.contextmanager
def caught() -> Iterator[list[str]]:
    """Inside, torch's loggers record their warnings in the list yielded instead of printing them."""
    messages: list[str] = []
    recorder = _Recorder(messages)
    swapped = _printing_handlers()
    for logger, handler in swapped:
        logger.removeHandler(handler)
        logger.addHandler(recorder)
    try:
        yield messages
    finally:
        for logger, handler in swapped:
            logger.removeHandler(recorder)
            logger.addHandler(handler)


def summary(rows: list[dict]) -> str | None:
    """One line: how many warnings torch logged in which systems' configurations, by kind (a message's first
    line); None when none did."""
    by_system: dict[str, int] = collections.Counter()
    kinds: dict[str, int] = collections.Counter()
    for row in rows:
        for message in row.get("torch_warnings", ()):
            by_system[row["system"]] += 1
            kinds[message.splitlines()[0].rstrip(" :,")] += 1
    if not kinds:
        return None
    where = ", ".join(f"{system} {n}" for system, n in by_system.items())
    what = "; ".join(f"{n} x {kind}" for kind, n in kinds.most_common())
    total = sum(kinds.values())
    return (
        f"torch logged {total} warning{'s' if total > 1 else ''} in the timed subprocesses ({where}), caught there and "
        f"kept in results.json (`torch_warnings` per row): {what}."
    )
