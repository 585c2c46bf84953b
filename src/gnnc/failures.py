"""The compiler's failure boundary: stages name themselves, and a failure inside one falls back by that name.

``stage(name)`` (a context manager, or a decorator) marks a stage of compiling or running compiled code:
capture, a forward pass and its run-time part, tracing, an MP-DFG pass, lowering, code generation, the cost
model, a plan's binding and run. An exception leaving it carries the innermost stage's name (``stage_of``).
The boundaries that catch such exceptions are two: one per message-passing call
(``gnnc.compiler.driver.run``) and one per captured forward (``gnnc.forward.capture.Forwards``). Each
first runs the same work eagerly, so that an error of the user's own is raised as eager raises it; where
eager succeeds it issues one ``FallbackWarning`` naming the stage and the user's line (``fell_back``) and
returns eager's result.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

import torch

from .stage_timings import timed

_STAGE = "_gnnc_stage"


class FallbackWarning(UserWarning):
    """A call ran on the eager executor because compilation failed."""


@contextlib.contextmanager
def stage(name: str):
    """Name the stage run inside the block: an exception leaving it is marked with ``name``, unless a stage
    inside this one marked it first; while ``stage_timings.recording``, its time is recorded as ``name``'s."""
    with timed(name):
        try:
            yield
        except Exception as err:
            if stage_of(err) is None:
                with contextlib.suppress(AttributeError):  # an exception type without attributes stays unnamed
                    setattr(err, _STAGE, name)
            raise


def stage_of(err: BaseException, default: str | None = None) -> str | None:
    """The innermost stage ``err`` left (``default`` if it left none)."""
    return getattr(err, _STAGE, default)


class SetupRefusal(Exception):
    """Mixed into an error that means the user's setup, not gnnc, stopped compiling (a kernel folder others
    can write): its fallback warning says what to change and does not call it a gnnc bug."""


def blame(err: BaseException) -> str:
    """The end of a fallback warning after ``err``: nothing for a ``SetupRefusal``, else "; a gnnc bug"."""
    return "" if isinstance(err, SetupRefusal) else "; a gnnc bug"


def failure(err: BaseException, default: str) -> str:
    """``"<stage> failed (<exception>: <first line>)"`` for ``err``, caught at a boundary."""
    lines = str(err).strip().splitlines() or [""]
    return f"{stage_of(err, default)} failed ({type(err).__name__}: {lines[0][:200]})"


_LIBRARIES = (
    *(
        os.path.dirname(os.path.abspath(init)) + os.sep  # gnnc's and torch's folders
        for init in (__file__, torch.__file__)
    ),
    os.path.abspath(contextlib.__file__),
)  # a stage used as a decorator calls through it
_GENERATED = ("<eval_with_key>", "<gnnc capture>")  # fx's code of a captured forward, and capture's wrapper


def _user_frame():
    """The innermost frame of the user's code running now: outside gnnc, torch and the code they generate
    (a message-passing call's line in the user's forward, or the call of a compiled model)."""
    frame = sys._getframe(1)
    while frame is not None and (
        os.path.abspath(frame.f_code.co_filename).startswith(_LIBRARIES)
        or frame.f_code.co_filename.startswith(_GENERATED)
    ):
        frame = frame.f_back
    return frame


def user_line() -> str | None:
    """``file:line`` of the user's code running now (see ``_user_frame``), or None."""
    frame = _user_frame()
    return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def fell_back(what: str, where: str | None = None) -> str:
    """Warn (one ``FallbackWarning``, issued at the user's line) that ``what`` runs eagerly, naming ``where``
    and that line; returns the message."""
    frame = _user_frame()
    site = None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"
    details = "; ".join(part for part in (where, site and f"called at {site}") if part)
    message = f"{what} ({details})" if details else what
    if frame is None:
        warnings.warn(message, FallbackWarning, stacklevel=2)
    else:
        # a module name of None (code run by exec, as Sphinx's doctests) makes warn_explicit drop the warning
        warnings.warn_explicit(
            message,
            FallbackWarning,
            frame.f_code.co_filename,
            frame.f_lineno,
            module=frame.f_globals.get("__name__") or "__main__",
            registry=frame.f_globals.setdefault("__warningregistry__", {}),
            module_globals=frame.f_globals,
        )
    return message


__all__ = ["FallbackWarning", "stage", "stage_of", "failure", "user_line", "fell_back"]
