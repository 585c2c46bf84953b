"""pytest plugin for ``bench/dgl_tests.py``: DGL's own tests run against gnnc in one pytest process.

Loaded with ``-p harness.dgl_plugin``. On import it installs gnnc's DGL alias (before any test module or
the tests' ``backend`` package imports ``dgl``). ``GNNC_DGL_MODE=compiled`` runs every test's call inside
``compiling({})`` (every message-passing call goes through the compiler) and records the plans that ran
and the ``FallbackWarning``s raised. Each test's record is appended, as one JSON line, to the file named by
``GNNC_DGL_RECORDS`` as soon as its teardown ends, so a run cut short by a timeout keeps what finished.

A record: ``{"nodeid", "outcome": passed | failed | skipped | error, "message": first line of the error or
the skip reason, "when": the phase it came from}``, in compiled mode with ``"compiled_plans"``,
``"fallback_plans"`` and ``"fallbacks"`` (the first line of each FallbackWarning). A module that fails to
collect gives ``{"nodeid": <file>, "outcome": "collection error", "message": ...}``.
"""

from __future__ import annotations

import json
import os
import warnings
import zlib

import pytest

from gnnc.compat import dgl as dgl_alias
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.message_passing import compiling

dgl_alias.install()

_COMPILED = os.environ.get("GNNC_DGL_MODE", "eager") == "compiled"
_RECORDS = os.environ["GNNC_DGL_RECORDS"]
_SAMPLE = int(os.environ.get("GNNC_DGL_SAMPLE", "0"))  # parametrizations kept per test function (0: all)
_pending: dict[str, dict] = {}  # nodeid -> its record until teardown


def first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def _write(record: dict) -> None:
    with open(_RECORDS, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def _error_line(longrepr) -> str:
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return first_line(crash.message)
    errors = [line[1:].strip() for line in str(longrepr).splitlines() if line.startswith("E ")]
    return errors[-1] if errors else first_line(longrepr)


def _skip_reason(longrepr) -> str:
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return first_line(reason.removeprefix("Skipped: "))


def pytest_collection_modifyitems(config, items):
    """With ``GNNC_DGL_SAMPLE=N``, at most N parametrizations of each test function run: the same N every time
    (the smallest CRC-32s of their node ids); each one left out is recorded as ``sampled out``."""
    if not _SAMPLE:
        return
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(item.nodeid.partition("[")[0], []).append(item)
    kept = set()
    for group in groups.values():
        kept.update(id(i) for i in sorted(group, key=lambda i: zlib.crc32(i.nodeid.encode()))[:_SAMPLE])
    left_out = [i for i in items if id(i) not in kept]
    for item in left_out:
        _write({"nodeid": item.nodeid, "outcome": "sampled out"})
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [i for i in items if id(i) in kept]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not _COMPILED:
        yield
        return
    with compiling({}), recording() as plans, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        yield
    _pending.setdefault(item.nodeid, {}).update(
        compiled_plans=sum(plan.module is not None for plan in plans),
        fallback_plans=sum(plan.module is None for plan in plans),
        fallbacks=[first_line(w.message) for w in caught if issubclass(w.category, FallbackWarning)],
    )


def pytest_runtest_logreport(report):
    record = _pending.setdefault(report.nodeid, {})
    settled = record.get("outcome") not in (None, "passed")  # the first skip or failure is the test's outcome
    if report.passed:
        record.setdefault("outcome", "passed")
    elif report.skipped and not settled:
        record.update(outcome="skipped", when=report.when, message=_skip_reason(report.longrepr))
    elif report.failed and not settled:
        outcome = "failed" if report.when == "call" else "error"
        record.update(outcome=outcome, when=report.when, message=_error_line(report.longrepr))
    if report.when == "teardown":
        _write({"nodeid": report.nodeid, **_pending.pop(report.nodeid)})


def pytest_collectreport(report):
    if report.failed:
        _write(
            {
                "nodeid": report.nodeid,
                "outcome": "collection error",
                "when": "collect",
                "message": _error_line(report.longrepr),
            }
        )
