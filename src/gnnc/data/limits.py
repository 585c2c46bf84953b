"""The bounds every file loader checks a declared size against before it allocates, in one place.

The defaults accept ogbn-papers100M (111M nodes, 1.6B edges, 172 classes)
with room to spare and refuse what no real graph file declares (a trillion
nodes, a billion classes). ``configure(max_nodes=...)`` changes them for a
``with`` block; ``LIMITS`` holds the values in force.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_nodes: int = 1 << 32  # per node type
    max_edges: int = 1 << 34  # per relation
    max_classes: int = 1 << 20  # largest label + 1
    max_dense_bytes: int = 1 << 38  # one dense array built from a sparse or implicit description (256 GiB)
    max_text_line: int = 1 << 24  # characters in one line of a line-based text file (N-Triples, TSV)


LIMITS = Limits()


@contextlib.contextmanager
def configure(**changes):
    """Use ``Limits`` with ``changes`` inside the ``with`` block (loaders read ``LIMITS`` when called)."""
    global LIMITS
    before = LIMITS
    LIMITS = dataclasses.replace(LIMITS, **changes)
    try:
        yield LIMITS
    finally:
        LIMITS = before


def check_count(value, kind: str, where) -> int:
    """``value`` as an int if it is a count in [0, the ``kind`` limit] ('nodes', 'edges', 'classes');
    else ValueError naming ``where`` (a file, with offset or row where known)."""
    limit = getattr(LIMITS, f"max_{kind}")
    try:
        count = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: {kind} count {value!r} is not an integer") from None
    if count != value or not 0 <= count <= limit:
        raise ValueError(
            f"{where}: declares {value!r} {kind}; gnnc.data.limits accepts 0 to {limit:,} "
            f"(raise it with gnnc.data.limits.configure(max_{kind}=...))"
        )
    return count


def check_dense(shape, itemsize: int, where) -> None:
    """ValueError naming ``where`` when a dense array of ``shape`` would exceed ``max_dense_bytes``."""
    size = itemsize
    for n in shape:
        size *= int(n)
    if size > LIMITS.max_dense_bytes:
        raise ValueError(
            f"{where}: a dense array of shape {tuple(int(n) for n in shape)} needs {size:,} bytes; "
            f"gnnc.data.limits accepts {LIMITS.max_dense_bytes:,} (max_dense_bytes)"
        )
