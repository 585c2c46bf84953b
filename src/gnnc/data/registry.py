"""Published figures of the benchmark graphs that ``gnnc.data.synthetic`` replicates.

Homogeneous figures are those of the standard releases (Planetoid, DGL's PPI
and Reddit, OGB's arxiv and proteins) as used by Graphiler and Zhang et al.;
heterogeneous figures are the Hector paper's dataset table (nodes, node types,
edges, relations). Where a published per-type breakdown is known (mag, biokg)
it is recorded and reproduced exactly; other schemas are drawn from the seed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GRAPHILER = "Graphiler (Xie et al., MLSys 2022)"
GRAPHILER_WS = "Graphiler (Xie et al., GNNSys 2021)"
COMP_GRAPH = "Understanding GNN Computational Graph (Zhang et al., MLSys 2022)"
HECTOR = "Hector (Wu et al., ASPLOS 2024), Table 3"

# Hector trains on link-prediction graphs with random labels over its 64-wide output.
HECTOR_RANDOM_CLASSES = 64


@dataclass(frozen=True)
class DatasetInfo:
    """Published statistics of one benchmark graph.

    ``ntype_counts`` / ``relation_counts`` are the published per-type
    breakdowns when known (else None); ``target_ntype`` is the labelled node
    type when the dataset names one (else the replica labels its largest type).
    """

    name: str
    kind: str  # "homogeneous" or "heterogeneous"
    num_nodes: int
    num_edges: int
    num_ntypes: int
    num_relations: int
    feat_dim: int
    num_classes: int
    task: str
    paper: str
    origin: str
    ntype_counts: tuple[tuple[str, int], ...] | None = None
    relation_counts: tuple[tuple[tuple[str, str, str], int], ...] | None = None
    target_ntype: str | None = None


def _homo(name, nodes, edges, feat, classes, paper, origin):
    return DatasetInfo(name, "homogeneous", nodes, edges, 1, 1, feat, classes, "node classification", paper, origin)


def _hetero(name, nodes, ntypes, edges, rels, classes, task, origin, **schema):
    return DatasetInfo(name, "heterogeneous", nodes, edges, ntypes, rels, 64, classes, task, HECTOR, origin, **schema)


_MAG_NTYPES = (("paper", 736_389), ("author", 1_134_649), ("institution", 8_740), ("field_of_study", 59_965))
_MAG_RELATIONS = (
    (("author", "writes", "paper"), 7_145_660),
    (("paper", "cites", "paper"), 5_416_271),
    (("paper", "has_topic", "field_of_study"), 7_505_078),
    (("author", "affiliated_with", "institution"), 1_043_998),
)
_BIOKG_NTYPES = (
    ("disease", 10_687),
    ("drug", 10_533),
    ("function", 45_085),
    ("protein", 17_499),
    ("sideeffect", 9_969),
)

_ALL = [
    _homo("cora", 2_708, 10_556, 1433, 7, f"{GRAPHILER_WS}; {COMP_GRAPH}", "Planetoid (Sen et al., 2008)"),
    _homo("pubmed", 19_717, 88_651, 500, 3, GRAPHILER, "Planetoid (Sen et al., 2008)"),
    _homo("ppi", 56_944, 818_716, 50, 121, GRAPHILER, "PPI (Zitnik & Leskovec, 2017)"),
    _homo("arxiv", 169_343, 1_166_243, 128, 40, GRAPHILER, "ogbn-arxiv (Hu et al., 2020)"),
    _homo("reddit", 232_965, 114_615_892, 602, 41, f"{GRAPHILER}; {COMP_GRAPH}", "Reddit (Hamilton et al., 2017)"),
    _homo("proteins", 132_534, 39_561_252, 8, 112, GRAPHILER_WS, "ogbn-proteins (Hu et al., 2020)"),
    _hetero("aifb", 7_262, 7, 48_810, 104, 4, "node classification", "AIFB (Ristoski et al., 2016)"),
    _hetero("mutag", 27_163, 5, 148_100, 50, 2, "node classification", "MUTAG (Ristoski et al., 2016)"),
    _hetero("bgs", 94_806, 27, 672_884, 122, 2, "node classification", "BGS (Ristoski et al., 2016)"),
    _hetero("am", 1_885_136, 7, 5_668_682, 108, 11, "node classification", "AM (Ristoski et al., 2016)"),
    _hetero(
        "biokg",
        93_773,
        5,
        4_762_678,
        51,
        HECTOR_RANDOM_CLASSES,
        "link prediction",
        "ogbl-biokg (Hu et al., 2020)",
        ntype_counts=_BIOKG_NTYPES,
    ),
    _hetero(
        "fb15k",
        14_541,
        1,
        620_232,
        474,
        HECTOR_RANDOM_CLASSES,
        "link prediction",
        "FB15k-237 with inverse relations (Toutanova & Chen, 2015)",
        ntype_counts=(("entity", 14_541),),
    ),
    _hetero(
        "mag",
        1_939_743,
        4,
        21_111_007,
        4,
        349,
        "node classification",
        "ogbn-mag (Hu et al., 2020)",
        ntype_counts=_MAG_NTYPES,
        relation_counts=_MAG_RELATIONS,
        target_ntype="paper",
    ),
    _hetero(
        "wikikg2",
        2_500_604,
        1,
        16_109_182,
        535,
        HECTOR_RANDOM_CLASSES,
        "link prediction",
        "ogbl-wikikg2 (Hu et al., 2020)",
        ntype_counts=(("entity", 2_500_604),),
    ),
]

DATASETS: dict[str, DatasetInfo] = {info.name: info for info in _ALL}


def get_info(name: str) -> DatasetInfo:
    """The registry record of ``name``; KeyError listing the known names otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def list_datasets() -> list[DatasetInfo]:
    """Every registry record, homogeneous first, in registry order."""
    return list(DATASETS.values())


PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


@dataclass(frozen=True)
class RealDataset:
    """A real dataset the loaders read: the files it needs, relative to the data folder (``gnnc.data.paths``)."""

    name: str
    loader: str
    files: tuple[str, ...]
    figures: str

    @property
    def pattern(self) -> str:
        """The files in one short glob-like string, for listings."""
        if len(self.files) == 1:
            return self.files[0]
        common = os.path.commonprefix(list(self.files))
        return common[: max(common.rfind("/"), common.rfind(".")) + 1] + "*"

    def missing(self, root) -> list[str]:
        """The needed files absent under ``root`` (empty when the dataset is usable)."""
        return [f for f in self.files if not (Path(root) / f).is_file()]


def _planetoid(name, figures):
    return RealDataset(name, "load_planetoid", tuple(f"planetoid/ind.{name}.{p}" for p in PLANETOID_PARTS), figures)


def _rdf(name, loader, figures):
    """An RDF set as DGL's ``<name>-hetero.zip`` unpacks (its N-Triples file's name varies: the splits stand in)."""
    files = tuple(f"rdf/{name}-hetero/{split}" for split in ("trainingSet.tsv", "testSet.tsv"))
    return RealDataset(name, loader, files, figures)


REAL_DATASETS: dict[str, RealDataset] = {
    d.name: d
    for d in (
        _planetoid("cora", "2,708 nodes, 10,556 edges, 1,433 features, 7 classes"),
        _planetoid("citeseer", "3,327 nodes, 9,104 edges, 3,703 features, 6 classes"),
        RealDataset(
            "FB15k-237", "load_kg", ("kg/FB15k-237.tar.gz",), "14,541 entities, 237 relations (474 with inverses)"
        ),
        RealDataset("WN18RR", "load_kg", ("kg/WN18RR.tar.gz",), "40,943 entities, 11 relations"),
        _rdf("aifb", "AIFBDataset", "7,262 nodes, 48,810 edges (with reverses), 4 classes on Personen"),
        _rdf("mutag", "MUTAGDataset", "27,163 nodes, 148,100 edges (with reverses), 2 classes on d"),
        _rdf("bgs", "BGSDataset", "94,806 nodes, 672,884 edges (with reverses), 2 classes"),
        _rdf("am", "AMDataset", "881,680 nodes, 5,668,682 edges (with reverses), 11 classes on proxy"),
    )
}
