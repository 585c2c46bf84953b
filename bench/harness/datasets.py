"""Benchmark graphs and their input features, at the quick or the full size.

Real data (cora, FB15k-237) is read from the folder that
``gnnc.data.paths.data_root`` picks (--data-dir, $GNNC_DATA, the
``shared/data`` folder next to the repository, ~/.cache/gnnc/data); replicas come from
``gnnc.data.synthetic`` with 64-wide features. Quick mode shrinks the
replicas by ``QUICK_SCALES`` (their schema does not depend on the scale) and
takes from FB15k-237 only the validation triples among its 2,000 entities of
highest degree there (all 474 relations kept, some empty).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from gnnc import data as gdata
from gnnc.graph import Graph, heterograph
from gnnc.graph.reverse_relations import add_reverse_relations

FEAT_DIM = 64
HOMOGENEOUS, HETEROGENEOUS = "homogeneous", "heterogeneous"
QUICK_SCALES = {"pubmed": 0.1, "arxiv": 0.02, "aifb": 0.1, "mutag": 0.05, "bgs": 0.01, "mag": 0.002, "mag-rev": 0.002}
FB15K_QUICK_SPLIT = "valid"
FB15K_QUICK_ENTITIES = 2000


@dataclass
class BenchData:
    """One benchmark graph with its input features ``x`` ([num_nodes, width], global node ids)."""

    name: str
    graph: Graph
    x: torch.Tensor
    size: str  # how it was sized: "real", "scale 0.1", "FB15k-237 valid split"


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    kind: str
    source: str  # one line for the README and the report
    default: bool = True  # in a run that names no datasets (the large replicas are asked for by name)


DATASETS = {
    spec.name: spec
    for spec in (
        DatasetSpec("cora", HOMOGENEOUS, "Planetoid Cora (real), 1,433-wide bag-of-words features"),
        DatasetSpec("pubmed", HOMOGENEOUS, "replica of Pubmed, 64-wide features"),
        DatasetSpec("arxiv", HOMOGENEOUS, "replica of ogbn-arxiv, 64-wide features"),
        DatasetSpec("aifb", HETEROGENEOUS, "replica of AIFB (104 relations), 64-wide features"),
        DatasetSpec("mutag", HETEROGENEOUS, "replica of MUTAG (50 relations), 64-wide features"),
        DatasetSpec("bgs", HETEROGENEOUS, "replica of BGS (122 relations), 64-wide features"),
        DatasetSpec("fb15k", HETEROGENEOUS, "FB15k-237 (real) with inverse relations (474), random 64-wide features"),
        DatasetSpec(
            "mag", HETEROGENEOUS, "replica of ogbn-mag (4 node types, 4 relations), 64-wide features", default=False
        ),
        DatasetSpec(
            "mag-rev",
            HETEROGENEOUS,
            "replica of ogbn-mag with reverse relations (7; cites made symmetric), 64-wide features",
            default=False,
        ),
    )
}
DEFAULT_DATASETS = [name for name, spec in DATASETS.items() if spec.default]


def default_data_root(explicit=None) -> Path:
    """The real-data folder by gnnc's one rule (``gnnc.data.paths.data_root``): ``explicit`` when given."""
    return gdata.paths.data_root(explicit)


def missing_files(name: str, root: Path) -> str | None:
    """What real-data file ``name`` needs under ``root`` and lacks; None when all is there."""
    needed = {"cora": root / "planetoid" / "ind.cora.graph", "fb15k": root / "kg" / "FB15k-237.tar.gz"}.get(name)
    return str(needed) if needed is not None and not needed.exists() else None


def replica_scale(name: str, quick: bool, scale: float | None) -> float:
    """The replica scale: ``scale`` when given, else the quick scale or 1."""
    if scale is not None:
        return scale
    return QUICK_SCALES[name] if quick else 1.0


def load(name: str, quick: bool, seed: int, root: Path, scale: float | None = None) -> BenchData:
    """Dataset ``name`` as benchmarked; ``scale`` overrides the replica scale (real graphs ignore it)."""
    if name not in DATASETS:
        raise KeyError(f"unknown benchmark dataset {name!r}; known: {', '.join(DATASETS)}")
    if name == "cora":
        ds = gdata.load_planetoid("cora", root / "planetoid")
        return BenchData(name, ds.graph, ds.graph.ndata["feat"], "real")
    if name == "fb15k":
        kg = gdata.load_kg(root / "kg" / "FB15k-237.tar.gz", add_inverse=True)
        g = fb15k_quick_graph(kg) if quick else kg.graph
        x = torch.randn(g.num_nodes(), FEAT_DIM, generator=torch.Generator().manual_seed(seed))
        size = f"{FB15K_QUICK_SPLIT} triples of the top {FB15K_QUICK_ENTITIES} entities" if quick else "real"
        return BenchData(name, g, x, size)
    s = replica_scale(name, quick, scale)
    ds = gdata.synthetic(name.removesuffix("-rev"), scale=s, seed=seed, feat_dim=FEAT_DIM)
    g = add_reverse_relations(ds.graph) if name.endswith("-rev") else ds.graph
    return BenchData(name, g, g.ndata_all["feat"], f"scale {s:g}")


def save(data: BenchData, path: Path) -> None:
    """Write ``data`` (graph, features, size) for ``load_saved``: a run builds each dataset once."""
    torch.save(data, path)


def load_saved(path: Path) -> BenchData:
    """The ``BenchData`` that ``save`` wrote (a pickle this harness made itself, hence not weights-only)."""
    data = torch.load(path, weights_only=False)
    if not isinstance(data, BenchData):
        raise TypeError(f"{path} holds a {type(data).__name__}, not a saved benchmark dataset")
    return data


def fb15k_quick_graph(kg: gdata.KGDataset) -> Graph:
    """The ``FB15K_QUICK_SPLIT`` triples whose two entities are among the ``FB15K_QUICK_ENTITIES`` of
    highest degree in that split (ties by entity id), with inverse relations; entities renumbered,
    every relation kept in ``load_kg``'s order."""
    triples = kg.triples[FB15K_QUICK_SPLIT]
    heads, rels, tails = triples.unbind(1)
    degree = torch.bincount(torch.cat([heads, tails]), minlength=kg.num_entities)
    keep = torch.sort(degree, descending=True, stable=True).indices[:FB15K_QUICK_ENTITIES]
    new_id = torch.full((kg.num_entities,), -1, dtype=torch.int64)
    new_id[keep] = torch.arange(keep.numel())
    kept = (new_id[heads] >= 0) & (new_id[tails] >= 0)
    heads, rels, tails = new_id[heads[kept]], rels[kept], new_id[tails[kept]]
    entity = gdata.kg.ENTITY
    forward = {(entity, name, entity): (heads[rels == r], tails[rels == r]) for r, name in enumerate(kg.relations)}
    inverse = {
        (entity, name + gdata.kg.INVERSE_SUFFIX, entity): (tails[rels == r], heads[rels == r])
        for r, name in enumerate(kg.relations)
    }
    return heterograph({**forward, **inverse}, num_nodes={entity: keep.numel()})
