"""Recomputation in backward of node tensors that are cheap to rebuild (the computational-graph study's
recomputation, applied to a plan's dense node-space chains).

``remember(value, recipe, *leaves)`` runs inside a plan where the
``recompute`` pass marked ``value`` as ``recipe(*leaves)``: a short chain of
deterministic row-wise operators from the call's inputs. While a plan runs
under ``saving()``, autograd hooks replace every saved tensor that shares a
remembered value's storage by a note of how to rebuild it; backward rebuilds
it from the leaves when it unpacks it, so the value itself is freed once
forward no longer reads it. Only values of at least ``MIN_SHARE`` of their
device's memory are remembered, and only where autograd records: a rebuild
costs about what computing the value did in forward, which is worth paying
where the values are a sizeable share of the machine, not below (measured in
bench/results/docstring-figures.md).

Soundness: a value is recognized only while it is alive (its storage cannot
have been reused) and unchanged since it was computed (its version counter);
the leaves' versions are checked on unpack, and a leaf modified in place in
between raises as autograd does for a saved tensor. Rebuilding runs under
the backend the plan ran on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from dataclasses import dataclass

import torch

from .. import backend

# Smallest value worth rebuilding instead of keeping, as a share of its device's memory (384 MiB of 24 GiB).
MIN_SHARE = 1 / 64

_LOCK = threading.Lock()
_REMEMBERED: dict[int, _Entry] = {}  # storage address -> entry, while the value is alive


@dataclass
class _Entry:
    value: weakref.ref
    version: int
    recipe: object
    leaves: tuple
    backend: str


@dataclass
class _Rebuild:
    """What a saved tensor is replaced by: its recipe, leaves, their versions and its view geometry."""

    recipe: object
    leaves: tuple
    versions: tuple
    backend: str
    size: torch.Size
    stride: tuple
    offset: int


def remember(value: torch.Tensor, recipe, *leaves) -> torch.Tensor:
    """``value`` (= ``recipe(*leaves)``), remembered for rebuilding when it is large and autograd records."""
    if (
        torch.is_grad_enabled()
        and isinstance(value, torch.Tensor)
        and value.requires_grad
        and worth_rebuilding(value.nbytes, value.device)
        and value.is_contiguous()
        and value.storage_offset() == 0
        and value.untyped_storage().nbytes() == value.nbytes
    ):
        key = value.untyped_storage().data_ptr()
        entry = _Entry(weakref.ref(value), value._version, recipe, leaves, backend.active())
        with _LOCK:
            _REMEMBERED[key] = entry
        weakref.finalize(value, _forget, key, entry)
    return value


def worth_rebuilding(nbytes: int, device: torch.device) -> bool:
    """Whether a value of ``nbytes`` on ``device`` is large enough to rebuild in backward instead of keeping."""
    return nbytes >= MIN_SHARE * _memory_bytes(device)


@functools.cache
def _memory_bytes(device: torch.device) -> int:
    """The memory of ``device``: the GPU's for CUDA tensors, the machine's physical memory otherwise."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _forget(key: int, entry: _Entry) -> None:
    with _LOCK:
        if _REMEMBERED.get(key) is entry:
            del _REMEMBERED[key]


def _note(t: torch.Tensor) -> _Rebuild | None:
    """How to rebuild saved tensor ``t``, when it shares the storage of a live, unchanged remembered value."""
    if not _REMEMBERED or t.layout != torch.strided:
        return None
    with _LOCK:
        entry = _REMEMBERED.get(t.untyped_storage().data_ptr())
    value = None if entry is None else entry.value()
    if (
        value is None
        or value._version != entry.version
        or t._version != entry.version
        or t.dtype != value.dtype
        or t.device != value.device
    ):
        return None
    return _Rebuild(
        entry.recipe,
        entry.leaves,
        tuple(_version(x) for x in entry.leaves),
        entry.backend,
        t.size(),
        t.stride(),
        t.storage_offset(),
    )


def _rebuilt(note: _Rebuild) -> torch.Tensor:
    for leaf, version in zip(note.leaves, note.versions):
        if _version(leaf) != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: a {tuple(leaf.shape)} input of a compiled gnnc call (gnnc "
                "rebuilds some saved values from it in backward)"
            )
    with backend.using(note.backend):
        value = note.recipe(*note.leaves)
    return value.contiguous().as_strided(note.size, note.stride, note.offset)


def _version(x) -> int | None:
    return x._version if isinstance(x, torch.Tensor) else None


@contextlib.contextmanager
def saving():
    """Inside the block, tensors autograd saves that are remembered values are saved as rebuild notes;
    others go to the saved-tensor hooks already active (e.g. ``save_on_cpu``), if any."""
    autograd = torch._C._autograd  # no public way to read the active hooks, or whether hooks may be set
    if not autograd._saved_tensors_hooks_is_enabled():
        yield
        return
    outer_pack, outer_unpack = autograd._top_saved_tensors_default_hooks(False) or (None, None)

    def pack(t):
        note = _note(t)
        return note if note is not None else t if outer_pack is None else outer_pack(t)

    def unpack(packed):
        if isinstance(packed, _Rebuild):
            return _rebuilt(packed)
        return packed if outer_unpack is None else outer_unpack(packed)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield
