"""Pytest plugin: the full garbage collections of a session's end run before an xdist worker reports finished.

pytest's unraisable-exception plugin calls ``gc.collect()`` five times when the session's config is torn
down, after the worker has told the controller it finished. The controller then ends the worker's gateway,
and execnet gives a worker still running after 5 s a SIGINT. A full collection walks every object torch,
sympy, numba and the test modules created (about 350,000): 1.4-4.5 s each on a busy 2-core machine, so
the worker was interrupted inside the collections, and the KeyboardInterrupt surfaced in the first Python
code a collection runs (hypothesis's gc callback) as a traceback at the end of a passing run.

Here one collection runs while the worker is still in its session (its garbage, and any exception a
finaliser raises, still reach pytest), then ``gc.freeze`` moves what survives out of the collector's
generations: pytest's collections after that walk only what the end of the session allocates.
"""

from __future__ import annotations

import gc


def pytest_sessionfinish(session) -> None:
    gc.collect()
    gc.freeze()
