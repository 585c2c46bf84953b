"""Homogeneous graphs from text files of ``src dst`` lines."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from ..graph import Graph, graph
from .integrity import check_file
from .limits import check_count


def load_edge_list(
    path, num_nodes: int | None = None, delimiter: str | None = None, comments: str | None = "#"
) -> Graph:
    """A homogeneous graph with one edge per ``src dst`` line, in file order.

    Columns are split on ``delimiter`` (any whitespace when None); text after
    ``comments`` and blank lines are ignored. ``num_nodes`` defaults to the
    largest id + 1. FileNotFoundError for a missing file; ValueError naming
    the file and line for a wrong column count, a non-integer or negative id,
    or an id >= ``num_nodes``, or a node count beyond ``gnnc.data.limits``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"edge list {path} does not exist")
    check_file(path)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*input contained no data.*")
            edges = np.loadtxt(path, dtype=np.int64, delimiter=delimiter, comments=comments, ndmin=2)
    except ValueError as err:
        _raise_first_bad_line(path, delimiter, comments, num_nodes, str(err))
    if edges.size == 0:
        edges = np.zeros((0, 2), dtype=np.int64)
    if edges.shape[1] != 2 or (edges < 0).any() or (num_nodes is not None and (edges >= num_nodes).any()):
        _raise_first_bad_line(path, delimiter, comments, num_nodes, "malformed edge list")
    check_count(num_nodes if num_nodes is not None else int(edges.max(initial=-1)) + 1, "nodes", path)
    src, dst = torch.from_numpy(edges[:, 0].copy()), torch.from_numpy(edges[:, 1].copy())
    return graph((src, dst), num_nodes=num_nodes)


def _raise_first_bad_line(path: Path, delimiter, comments, num_nodes, fallback: str):
    """Raise ValueError for the first bad line of ``path`` (``fallback`` if none is found)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            body = line.split(comments, 1)[0] if comments else line
            if not body.strip():
                continue
            fields = body.split(delimiter)
            if len(fields) != 2:
                raise ValueError(
                    f"{path}, line {lineno}: expected 2 columns (src dst), got {len(fields)}: {line.rstrip()!r}"
                )
            for field in fields:
                try:
                    node = int(field)
                except ValueError:
                    raise ValueError(f"{path}, line {lineno}: node id {field.strip()!r} is not an integer") from None
                if node < 0:
                    raise ValueError(f"{path}, line {lineno}: node id {node} is negative")
                if num_nodes is not None and node >= num_nodes:
                    raise ValueError(f"{path}, line {lineno}: node id {node} is not below num_nodes={num_nodes}")
    raise ValueError(f"{path}: {fallback}")
