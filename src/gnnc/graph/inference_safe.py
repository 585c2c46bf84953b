"""What gnnc caches with a graph is made outside inference mode.

A tensor made under ``torch.inference_mode()`` can never be saved for
backward. Users evaluate in inference mode before and between training
steps on the same graph (Lightning's validation does by default); an index
structure first built then and kept with the graph (CSR, edge order, pair
tables, type groupings) would make every later training call on it fail.
Structure builders and message-passing calls run inside ``normal_tensors``:
inference mode is switched off there, and where it was on, gradients stay
off, so results are plain tensors that need no gradient.
"""

from __future__ import annotations

import contextlib
import functools
from functools import cached_property

import torch

from ..stage_timings import timed


@contextlib.contextmanager
def normal_tensors():
    """Inside the block inference mode is off; where it was on, ``torch.no_grad()`` takes its place."""
    if not torch.is_inference_mode_enabled():
        yield
        return
    with torch.inference_mode(False), torch.no_grad():
        yield


def lasting(fn):
    """``fn`` run inside ``normal_tensors``: what it returns may be cached and used in any mode."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with normal_tensors():
            return fn(*args, **kwargs)

    return run


def structure_builder(build):
    """``lasting(build)``, timed as graph preparation (``gnnc.stage_timings``)."""

    @functools.wraps(build)
    def timed_build(*args, **kwargs):
        with timed("graph preparation"):
            return build(*args, **kwargs)

    return lasting(timed_build)


def cached_structure(build) -> cached_property:
    """``functools.cached_property`` of ``structure_builder(build)``."""
    return cached_property(structure_builder(build))
