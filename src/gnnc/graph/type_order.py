"""Data laid out in another order of types, taken to a graph's order (DGL's: sorted names and triples).

Files written before gnnc followed DGL's order list their types by name in
the order they were written in; rows stored per type in that order (whole
features, type parameters) are moved with :func:`type_rows`.
"""

from __future__ import annotations

import torch


def type_rows(names: list, counts: list[int], order: list) -> torch.Tensor | None:
    """Row index taking blocks of ``counts[i]`` rows for type ``names[i]`` (in that order) to the blocks of
    ``order`` (the same types in another order); None when the two orders agree."""
    names = list(names)
    if names == list(order):
        return None
    starts, start = {}, 0
    for name, count in zip(names, counts):
        starts[name] = (start, int(count))
        start += int(count)
    return torch.cat(
        [torch.arange(lo, lo + n) for lo, n in (starts[name] for name in order)] + [torch.zeros(0, dtype=torch.int64)]
    )
