"""Where the real datasets come from: each file's canonical URL, its place in the data folder and its sha256.

The URLs are the ones DGL and PyG download from:

- Planetoid (cora, citeseer, pubmed): the ``ind.<name>.*`` files of Yang et al.'s repository, as PyG's
  ``Planetoid`` fetches them (DGL's ``CoraGraphDataset`` fetches the same files zipped from data.dgl.ai);
- OGB node sets: OGB's own zips at snap.stanford.edu, as ``ogb.nodeproppred`` fetches them (DGL and PyG
  both go through ``ogb``);
- FB15k-237, WN18RR: the ``.tar.gz`` files of Dettmers et al.'s ConvE repository, which DGL's and PyG's
  link-prediction examples use;
- the RDF sets (AIFB, MUTAG, BGS, AM): the ``<name>-hetero.zip`` archives that DGL 2.1's ``AIFBDataset``
  etc. download (``python/dgl/data/rdf.py``): the N-Triples files and ``trainingSet.tsv`` / ``testSet.tsv``
  at the archive's top level, unpacked into ``rdf/<name>-hetero/``. (PyG's ``Entities`` reads other files,
  ``data.dgl.ai/dataset/<name>.tgz``: the stripped graphs of Schlichtkrull et al., whose counts differ from
  DGL's, e.g. AIFB 8,285 nodes there against 7,262 in DGL's RDF datasets.)

A pinned ``sha256`` was computed from the copies in the project's ``../shared/data``; where no copy was at
hand and the source publishes none it is ``None``, and ``gnnc.data.download`` records the digest of the
first download in the data folder's lock file (trust on first use).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"
OGB_URL = "http://snap.stanford.edu/ogb/data/nodeproppred"
CONVE_URL = "https://github.com/TimDettmers/ConvE/raw/master"
RDF_URL = "https://data.dgl.ai/dataset"

PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


@dataclass(frozen=True)
class RemoteFile:
    """One file: fetched from ``url`` to ``path`` (relative to the data folder); ``unpack`` is the folder
    (relative to the data folder) a ``.zip`` / ``.tgz`` is extracted into after it is checked, or None."""

    url: str
    path: str
    sha256: str | None
    unpack: str | None = None


@dataclass(frozen=True)
class Source:
    """A downloadable dataset: its files and what it is."""

    name: str
    files: tuple[RemoteFile, ...]
    about: str


_PINNED = {  # sha256 of the ../shared/data copies
    "planetoid/ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "planetoid/ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "planetoid/ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "planetoid/ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "planetoid/ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "planetoid/ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "planetoid/ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "planetoid/ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "planetoid/ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "planetoid/ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "planetoid/ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "planetoid/ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "planetoid/ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "planetoid/ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "planetoid/ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "planetoid/ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "kg/FB15k-237.tar.gz": "311df7930f842a02979eaa7a802484a6afe62303c07f915f1e6edbc30cbe05e8",
    "kg/WN18RR.tar.gz": "1eb9152f804c140d163462c0d49f65e5a0b30ab5fbb375c5e3353c11a6249060",
}


def _planetoid(name: str, about: str) -> Source:
    paths = [f"planetoid/ind.{name}.{part}" for part in PLANETOID_PARTS]
    return Source(
        name, tuple(RemoteFile(f"{PLANETOID_URL}/{p.rsplit('/', 1)[1]}", p, _PINNED.get(p)) for p in paths), about
    )


def _archive(name: str, url: str, path: str, unpack: str, about: str) -> Source:
    return Source(name, (RemoteFile(url, path, _PINNED.get(path), unpack),), about)


def _ogb(short: str, about: str) -> Source:
    return _archive(
        f"ogbn-{short.removesuffix('-bin')}",
        f"{OGB_URL}/{short}.zip",
        f"ogb/{short}.zip",
        "ogb",
        about + "; read with gnnc.data.load_ogbn('<data folder>/ogb/" + short + "')",
    )


def _kg(name: str, about: str) -> Source:
    return _archive(name, f"{CONVE_URL}/{name}.tar.gz", f"kg/{name}.tar.gz", None, about)


def _rdf(name: str, about: str) -> Source:
    return _archive(name, f"{RDF_URL}/rdf/{name}-hetero.zip", f"rdf/{name}-hetero.zip", f"rdf/{name}-hetero", about)


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        _planetoid("cora", "Planetoid Cora: 2,708 nodes, 7 classes (1.6 MB)"),
        _planetoid("citeseer", "Planetoid Citeseer: 3,327 nodes, 6 classes (1 MB)"),
        _planetoid("pubmed", "Planetoid Pubmed: 19,717 nodes, 3 classes (about 40 MB)"),
        _ogb("arxiv", "ogbn-arxiv: 169,343 nodes (about 80 MB)"),
        _ogb("products", "ogbn-products: 2.4M nodes (about 1.4 GB)"),
        _ogb("proteins", "ogbn-proteins: 132,534 nodes (about 220 MB)"),
        _ogb("mag", "ogbn-mag: 1.9M nodes of 4 types (about 400 MB)"),
        _ogb("papers100M-bin", "ogbn-papers100M: 111M nodes (about 57 GB)"),
        _kg("FB15k-237", "FB15k-237: 14,541 entities, 237 relations (3.7 MB); read with gnnc.data.load_kg"),
        _kg("WN18RR", "WN18RR: 40,943 entities, 11 relations (0.9 MB); read with gnnc.data.load_kg"),
        _rdf("aifb", "AIFB RDF graph (Ristoski et al.) as DGL's AIFBDataset reads it; gnnc.data.AIFBDataset()"),
        _rdf("mutag", "MUTAG RDF graph (Ristoski et al.) as DGL's MUTAGDataset reads it; gnnc.data.MUTAGDataset()"),
        _rdf("bgs", "BGS RDF graph (Ristoski et al.) as DGL's BGSDataset reads it; gnnc.data.BGSDataset()"),
        _rdf("am", "AM RDF graph (Ristoski et al.) as DGL's AMDataset reads it; gnnc.data.AMDataset()"),
    )
}


def get_source(name: str) -> Source:
    """The source named ``name`` (case-insensitive); KeyError listing the names otherwise."""
    by_lower = {key.lower(): s for key, s in SOURCES.items()}
    try:
        return by_lower[name.lower()]
    except KeyError:
        raise KeyError(
            f"no download for {name!r}; `gnnc datasets download` takes one of {', '.join(SOURCES)}"
        ) from None


def owner(path: str) -> tuple[Source, RemoteFile] | None:
    """The source and file that ``path`` (relative to the data folder, ``/``-separated) was downloaded as, or
    unpacked from (a member of an archive's folder named after the archive); None for other files."""
    for source in SOURCES.values():
        for remote in source.files:
            if remote.path == path:
                return source, remote
    parts = PurePosixPath(path).parts
    for source in SOURCES.values():
        for remote in source.files:
            stem = PurePosixPath(remote.path).name.split(".")[0]
            if remote.unpack and path.startswith(remote.unpack + "/") and stem in parts:
                return source, remote
    return None
