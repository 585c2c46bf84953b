"""Seeded synthetic replicas of the registry's benchmark graphs.

``synthetic(name, scale, seed)`` matches the published node and edge counts
(times ``scale``), node types and relations, with power-law in-degrees. The
schema of a heterogeneous graph (type sizes, relation sizes and endpoints)
depends on the seed only, not on the scale, so small replicas mirror the
full one. Features are standard normal plus a per-class offset on labelled
nodes, so models can learn from them; labels are uniform over the classes.
"""

from __future__ import annotations

import math
import numbers
import zlib
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from .. import progress
from ..graph import DEFAULT_ETYPE, DEFAULT_NTYPE, heterograph
from ..graph.type_order import type_rows
from .dataset import Dataset, split_masks
from .power_law import Popularity, apportion, sample_sources
from .registry import DatasetInfo, get_info

PROGRESS_MIN_EDGES = 10_000_000  # show a progress bar from this many edges on
CLASS_SIGNAL = 1.0  # scale of the per-class feature offset


@dataclass(frozen=True)
class Schema:
    """Node types with counts and relations with counts, in graph order."""

    ntypes: list[tuple[str, int]]
    relations: list[tuple[tuple[str, str, str], int]]
    target_ntype: str


def scaled_count(count: int, scale: float) -> int:
    """``count * scale`` rounded half up."""
    return int(math.floor(count * scale + 0.5))


def synthetic(
    name: str, scale: float = 1.0, seed: int = 0, feat_dim: int | None = None, with_features: bool = True
) -> Dataset:
    """A replica of registry dataset ``name`` with ``scale`` times its nodes and edges.

    Every node type keeps at least one node (so a tiny replica may have a few
    more nodes than ``scale`` implies); every relation gets at least one edge
    when there are at least as many edges as relations. The same ``(name,
    scale, seed)`` always gives the same graph. ``feat_dim`` defaults to the
    published width (64 for heterogeneous graphs); ``with_features=False``
    skips ``ndata_all['feat']``. KeyError for an unknown name, ValueError for a
    scale outside (0, 1] or a bad seed / feat_dim.
    """
    info = get_info(name)
    _check_args(scale, seed, feat_dim)
    feat_dim = info.feat_dim if feat_dim is None else int(feat_dim)
    streams = np.random.SeedSequence([zlib.crc32(name.encode()), seed]).spawn(4)
    schema_rng, edge_rng, label_rng, feat_rng = (np.random.default_rng(s) for s in streams)
    schema = make_schema(info, scale, schema_rng)
    total = sum(c for _, c in schema.relations)
    with progress.bar(
        total=total,
        unit="edge",
        unit_scale=True,
        desc=f"synthetic {name}: edges",
        disable=total < PROGRESS_MIN_EDGES,
        leave=False,
    ) as bar:
        relations = _sample_relations(schema, edge_rng, bar)
        bar.set_description(f"synthetic {name}: graph")
        g = heterograph(relations, num_nodes=dict(schema.ntypes))
        del relations  # the graph holds its own copies of the edge ids
        target = schema.target_ntype
        n_target = g.num_nodes(target)
        labels = torch.from_numpy(label_rng.integers(0, info.num_classes, n_target, dtype=np.int64))
        train, val, test = split_masks(n_target, torch.from_numpy(label_rng.permutation(n_target)))
        if with_features:
            bar.set_description(f"synthetic {name}: features")
            g.ndata_all["feat"] = _features(feat_rng, g, schema, labels, feat_dim, info.num_classes)
    data = g.nodes[target].data
    data["label"], data["train_mask"], data["val_mask"], data["test_mask"] = labels, train, val, test
    return Dataset(name, g, info.num_classes, target)


def _check_args(scale, seed, feat_dim) -> None:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1], got {scale!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if feat_dim is not None and (
        isinstance(feat_dim, bool) or not isinstance(feat_dim, numbers.Integral) or feat_dim < 1
    ):
        raise ValueError(f"feat_dim must be a positive integer or None, got {feat_dim!r}")


def make_schema(info: DatasetInfo, scale: float, rng: np.random.Generator) -> Schema:
    """Node-type and relation sizes at ``scale``; draws from ``rng`` do not depend on scale."""
    if info.kind == "homogeneous":
        n = max(1, scaled_count(info.num_nodes, scale))
        return Schema(
            [(DEFAULT_NTYPE, n)],
            [((DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE), scaled_count(info.num_edges, scale))],
            DEFAULT_NTYPE,
        )
    if info.ntype_counts is not None:
        names = [t for t, _ in info.ntype_counts]
        ntype_weights = np.array([c for _, c in info.ntype_counts], dtype=np.float64)
    else:
        names = [f"t{i}" for i in range(info.num_ntypes)]
        ntype_weights = rng.lognormal(0.0, 1.5, info.num_ntypes)
    if info.relation_counts is not None:
        keys = [k for k, _ in info.relation_counts]
        rel_weights = np.array([c for _, c in info.relation_counts], dtype=np.float64)
    else:
        rel_weights = rng.lognormal(0.0, 2.0, info.num_relations)
        keys = _random_endpoints(rng, names, ntype_weights, info.num_relations)
    n = max(info.num_ntypes, scaled_count(info.num_nodes, scale))
    e = scaled_count(info.num_edges, scale)
    ntype_counts = apportion(n, ntype_weights, minimum=1)
    rel_counts = apportion(e, rel_weights, minimum=1 if e >= info.num_relations else 0)
    ntypes = list(zip(names, ntype_counts.tolist()))
    target = info.target_ntype or names[int(np.argmax(ntype_weights))]
    return Schema(ntypes, list(zip(keys, rel_counts.tolist())), target)


def _random_endpoints(rng, names, ntype_weights, num_relations) -> list[tuple[str, str, str]]:
    """(src type, r<i>, dst type) per relation; larger types are likelier endpoints
    and every type is the destination of some relation when there are enough."""
    p = np.sqrt(ntype_weights)
    p /= p.sum()
    src = rng.choice(len(names), size=num_relations, p=p)
    dst = rng.choice(len(names), size=num_relations, p=p)
    covered = min(num_relations, len(names))
    dst[rng.permutation(num_relations)[:covered]] = rng.permutation(len(names))[:covered]
    return [(names[s], f"r{i}", names[d]) for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist()))]


def _sample_relations(schema: Schema, rng: np.random.Generator, bar: tqdm) -> dict:
    """``{relation: (src, dst)}`` local ids, each relation sorted by destination."""
    counts = dict(schema.ntypes)
    # One popularity / activity order per node type, shared by its relations.
    popularity = {t: Popularity(rng, c) for t, c in counts.items()}
    activity = {t: rng.permutation(c) for t, c in counts.items()}
    relations = {}
    for (st, rel, dt), count in schema.relations:
        dst = popularity[dt].sample(rng, count)
        src = sample_sources(rng, activity[st], count, bar)
        relations[(st, rel, dt)] = (torch.from_numpy(src), torch.from_numpy(dst))
    return relations


def _features(rng, g, schema, labels, feat_dim, num_classes) -> torch.Tensor:
    """Every node's features, drawn type by type in the schema's order (so a dataset's numbers do not depend
    on the graph's type order), returned in the graph's."""
    names = [t for t, _ in schema.ntypes]
    counts = [g.num_nodes(t) for t in names]
    feat = rng.standard_normal((g.num_nodes(), feat_dim), dtype=np.float32)
    centroids = rng.standard_normal((num_classes, feat_dim), dtype=np.float32) * CLASS_SIGNAL
    lo = sum(counts[: names.index(schema.target_ntype)])
    feat[lo : lo + labels.numel()] += centroids[labels.numpy()]
    rows = type_rows(names, counts, g.ntypes)
    return torch.from_numpy(feat if rows is None else feat[rows.numpy()])
