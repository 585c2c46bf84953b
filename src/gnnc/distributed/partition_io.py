"""Partition records and their on-disk format.

In memory a partitioned graph is a ``PartitionedGraph``: the method, the
parent graph's schema, the parameters that made it, and one
``Partitioning`` per part. A part holds its local graph (structure, edge
features, type parameters), the features of the nodes it owns, id maps back
to the parent graph, and its boundary nodes.

Id conventions. Node ids in a part are local to their node type, like
``heterograph``'s: ``node_ids[t][i]`` is the parent's id (within type t) of
local node i of type t. The first ``num_owned[t]`` local nodes of type t are
the ones the part owns (ascending parent ids; their features are
``node_feats[t]``, row i for local node i); the rest are halo nodes, remote
neighbours whose features live with their owners. ``edge_ids[rel][j]`` is
the parent's id (within relation rel, user edge order) of local edge j.
A meta partition owns every node of its node types (no halo), so a
non-target type may be owned by several parts; in an edge-cut partition
every node has exactly one owner (``PartitionedGraph.owner``).

On disk (``save_partitions`` / ``load_partitions``)::

    OUT/manifest.json
    OUT/part0/graph.npz   local graph, written by gnnc.data.save_npz
    OUT/part0/feats.npz   owned nodes' features: an edgeless graph whose type t
                          has num_owned[t] nodes, written by save_npz
    OUT/part0/ids.npz     numpy archive: node_ids_<i> and boundary_<i> for the
                          part's i-th node type, edge_ids_<j> for its j-th relation
    OUT/part1/...

``manifest.json`` holds ``format`` ("gnnc-partitions"), ``version`` (1),
``method``, ``num_parts``, ``params`` (how the partitions were made), the
parent ``schema`` (``ntypes``: [name, count] pairs; ``relations``:
[[src, rel, dst], count] pairs, in graph order) and ``parts``: per part its
``id``, ``dir``, ``relations``, ``node_types`` (``ids.npz``'s i and j count
in these two lists), ``node_counts``,
``num_owned``, ``num_edges``, ``boundary`` (count per node type), ``info``
(method specific, e.g. the metatree pieces of a meta partition) and
``files`` ({role: {"name", "sha256"}}). Loading checks the format and
version, that every part directory and file exists, every checksum, and
that every file agrees with the manifest and the parent schema; any failure
raises an error naming the file. The loaded schema and graphs have DGL's
type order, whatever order the files were written in (by name).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..data import load_npz, save_npz
from ..graph import Graph, MetaGraph, heterograph
from .metagraph import Relation

FORMAT = "gnnc-partitions"
VERSION = 1
MANIFEST = "manifest.json"
FILES = {"graph": "graph.npz", "feats": "feats.npz", "ids": "ids.npz"}
PART_KEYS = ("id", "dir", "relations", "node_types", "node_counts", "num_owned", "info", "files")


@dataclass
class Partitioning:
    """One part of a partitioned graph; see the module docstring for the id maps."""

    part_id: int
    graph: Graph
    node_ids: dict[str, torch.Tensor]
    num_owned: dict[str, int]
    edge_ids: dict[Relation, torch.Tensor]
    node_feats: dict[str, dict[str, torch.Tensor]]
    boundary: dict[str, torch.Tensor]
    info: dict = field(default_factory=dict)

    @property
    def relations(self) -> list[Relation]:
        return self.graph.canonical_etypes

    @property
    def node_types(self) -> list[str]:
        return self.graph.ntypes

    @property
    def node_counts(self) -> dict[str, int]:
        return {t: self.graph.num_nodes(t) for t in self.graph.ntypes}

    @property
    def num_edges(self) -> int:
        return self.graph.num_edges()

    @property
    def feature_bytes(self) -> int:
        return sum(v.numel() * v.element_size() for feats in self.node_feats.values() for v in feats.values())

    def owned(self, ntype: str) -> torch.Tensor:
        """Parent ids of the ``ntype`` nodes this part owns."""
        return self.node_ids[ntype][: self.num_owned[ntype]]

    def halo(self, ntype: str) -> torch.Tensor:
        """Parent ids of the remote ``ntype`` neighbours this part's edges reach."""
        return self.node_ids[ntype][self.num_owned[ntype] :]

    def to_local(self, ntype: str, parent_ids) -> torch.Tensor:
        """Local ids of parent ``ntype`` ids; ValueError naming an id the part lacks."""
        ids = torch.as_tensor(parent_ids, dtype=torch.int64)
        known = self.node_ids[ntype]
        order = torch.argsort(known)
        pos = torch.searchsorted(known[order], ids)
        hit = pos < known.numel()
        hit[hit.clone()] = known[order][pos[hit]] == ids[hit]
        if not bool(hit.all()):
            raise ValueError(f"part {self.part_id} has no {ntype!r} node with parent id {int(ids[~hit][0])}")
        return order[pos]


@dataclass
class PartitionedGraph:
    """Every part of a graph, with the parent's schema and how it was partitioned."""

    method: str
    schema: MetaGraph
    parts: list[Partitioning]
    params: dict = field(default_factory=dict)

    @property
    def num_parts(self) -> int:
        return len(self.parts)

    def owner(self, ntype: str) -> torch.Tensor:
        """Owning part of every ``ntype`` node of the parent; ValueError unless each has exactly one."""
        count = dict(self.schema.ntypes)[ntype]
        owner = torch.full((count,), -1, dtype=torch.int64)
        for part in self.parts:
            if ntype not in part.node_ids:
                continue
            ids = part.owned(ntype)
            if bool((owner[ids] >= 0).any()):
                raise ValueError(f"{ntype!r} nodes are owned by several parts ({self.method} partitioning)")
            owner[ids] = part.part_id
        if bool((owner < 0).any()):
            raise ValueError(f"{int((owner < 0).sum())} {ntype!r} nodes have no owner")
        return owner

    def balance(self) -> dict[str, float]:
        """max / mean over parts of stored edges, stored nodes, owned nodes and feature bytes."""
        stats = {
            "edges": [p.num_edges for p in self.parts],
            "nodes": [sum(p.node_counts.values()) for p in self.parts],
            "owned_nodes": [sum(p.num_owned.values()) for p in self.parts],
            "feature_bytes": [p.feature_bytes for p in self.parts],
        }
        return {k: max_over_mean(v) for k, v in stats.items()}


def max_over_mean(values) -> float:
    """Imbalance of per-part loads: 1.0 is perfect; 1.0 for all-zero loads."""
    values = [float(v) for v in values]
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else 1.0


# --------------------------------------------------------------------- saving
def save_partitions(parts: PartitionedGraph, out_dir) -> Path:
    """Write ``parts`` under ``out_dir`` (created if needed); returns the manifest path.

    An existing manifest is removed first and the new one written last, so
    an interrupted save never leaves a manifest that matches stale files.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST
    manifest_path.unlink(missing_ok=True)
    records = [_save_part(part, out) for part in parts.parts]
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "method": parts.method,
        "num_parts": parts.num_parts,
        "params": parts.params,
        "schema": {
            "ntypes": [[t, c] for t, c in parts.schema.ntypes],
            "relations": [[list(rel), c] for rel, c in parts.schema.relations],
        },
        "parts": records,
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, manifest_path)
    return manifest_path


def _save_part(part: Partitioning, out: Path) -> dict:
    sub = f"part{part.part_id}"
    folder = out / sub
    folder.mkdir(exist_ok=True)
    ntypes, rels = part.node_types, part.relations
    save_npz(part.graph, folder / FILES["graph"])
    save_npz(_feature_graph(part), folder / FILES["feats"])
    arrays = {}
    for i, t in enumerate(ntypes):
        arrays[f"node_ids_{i}"] = part.node_ids[t].numpy()
        arrays[f"boundary_{i}"] = part.boundary.get(t, torch.zeros(0, dtype=torch.int64)).numpy()
    for j, rel in enumerate(rels):
        arrays[f"edge_ids_{j}"] = part.edge_ids[rel].numpy()
    with open(folder / FILES["ids"], "wb") as f:
        np.savez(f, **arrays)
    return {
        "id": part.part_id,
        "dir": sub,
        "relations": [list(rel) for rel in rels],
        "node_types": ntypes,
        "node_counts": part.node_counts,
        "num_owned": {t: part.num_owned[t] for t in ntypes},
        "num_edges": part.num_edges,
        "boundary": {t: int(ids.numel()) for t, ids in part.boundary.items()},
        "info": part.info,
        "files": {role: {"name": name, "sha256": _sha256(folder / name)} for role, name in FILES.items()},
    }


def _feature_graph(part: Partitioning) -> Graph:
    """An edgeless graph over the owned nodes carrying their features (save_npz keeps dtypes)."""
    g = heterograph({}, num_nodes={t: part.num_owned[t] for t in part.node_types})
    for t, feats in part.node_feats.items():
        for key, value in feats.items():
            g.nodes[t].data[key] = value
    return g


# -------------------------------------------------------------------- loading
def load_partitions(out_dir) -> PartitionedGraph:
    """Read and validate what ``save_partitions`` wrote.

    FileNotFoundError for a missing manifest, part directory or file;
    ValueError for a wrong format or version, a checksum mismatch, or a
    file that disagrees with the manifest or the parent schema. Every
    message names the file at fault.
    """
    out = Path(out_dir)
    manifest_path = out / MANIFEST
    manifest = _read_manifest(manifest_path)
    schema = MetaGraph(
        tuple(sorted((t, int(c)) for t, c in manifest["schema"]["ntypes"])),
        tuple(sorted((tuple(rel), int(c)) for rel, c in manifest["schema"]["relations"])),
    )
    if len(manifest["parts"]) != manifest["num_parts"]:
        raise ValueError(
            f"{manifest_path}: num_parts is {manifest['num_parts']} but {len(manifest['parts'])} parts are listed"
        )
    parts = [_load_part(out, record, schema, manifest_path) for record in manifest["parts"]]
    return PartitionedGraph(manifest["method"], schema, parts, manifest["params"])


def _read_manifest(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"partition manifest {path} does not exist")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(
            f"{path}: not a gnnc partition manifest (format "
            f"{manifest.get('format') if isinstance(manifest, dict) else None!r}, expected {FORMAT!r})"
        )
    if manifest.get("version") != VERSION:
        raise ValueError(
            f"{path}: partition format version {manifest.get('version')!r}, this gnnc reads version {VERSION}"
        )
    missing = [k for k in ("method", "num_parts", "params", "schema", "parts") if k not in manifest]
    if missing:
        raise ValueError(f"{path}: manifest lacks {missing}")
    return manifest


def _load_part(out: Path, record: dict, schema: MetaGraph, manifest_path: Path) -> Partitioning:
    missing = [k for k in PART_KEYS if not isinstance(record, dict) or k not in record]
    if missing:
        raise ValueError(f"{manifest_path}: a part record lacks {missing}")
    if Path(record["dir"]).name != record["dir"]:
        raise ValueError(f"{manifest_path}: part directory {record['dir']!r} must be a plain name inside {out}")
    folder = out / record["dir"]
    if not folder.is_dir():
        raise FileNotFoundError(f"part directory {folder} (listed in {manifest_path}) does not exist")
    paths = {}
    for role in FILES:
        entry = record["files"].get(role) if isinstance(record["files"], dict) else None
        if (
            not isinstance(entry, dict)
            or Path(str(entry.get("name"))).name != entry.get("name")
            or "sha256" not in entry
        ):
            raise ValueError(f"{manifest_path}: part {record['id']} has a malformed {role!r} file entry {entry!r}")
        path = folder / entry["name"]
        if not path.is_file():
            raise FileNotFoundError(f"partition file {path} (listed in {manifest_path}) does not exist")
        digest = _sha256(path)
        if digest != entry["sha256"]:
            raise ValueError(
                f"{path}: checksum mismatch (sha256 {digest}, manifest {manifest_path} "
                f"expects {entry['sha256']}); the file is corrupt or from another partitioning"
            )
        paths[role] = path
    graph = load_npz(paths["graph"])
    ntypes, rels = record["node_types"], [tuple(rel) for rel in record["relations"]]
    _check_graph_schema(graph, paths["graph"], ntypes, rels, record["node_counts"], schema)
    feats = load_npz(paths["feats"])
    owned = {t: int(record["num_owned"][t]) for t in ntypes}
    if feats.ntypes != sorted(ntypes) or feats.num_edges() or any(feats.num_nodes(t) != owned[t] for t in ntypes):
        raise ValueError(
            f"{paths['feats']}: expected an edgeless graph with owned node counts {owned}, "
            f"got {dict(zip(feats.ntypes, (feats.num_nodes(t) for t in feats.ntypes)))}"
        )
    ids = _read_ids(paths["ids"], graph, schema, owned, ntypes, rels)
    return Partitioning(
        part_id=int(record["id"]),
        graph=graph,
        node_ids=ids["node_ids"],
        num_owned=owned,
        edge_ids=ids["edge_ids"],
        node_feats={t: dict(feats.nodes[t].data.items()) for t in ntypes},
        boundary=ids["boundary"],
        info=record["info"],
    )


def _check_graph_schema(graph: Graph, path: Path, ntypes, rels, node_counts, schema: MetaGraph) -> None:
    got_counts = {t: graph.num_nodes(t) for t in graph.ntypes}
    if graph.ntypes != sorted(ntypes) or graph.canonical_etypes != sorted(rels) or got_counts != node_counts:
        raise ValueError(
            f"{path}: schema mismatch: file has node types {got_counts} and relations "
            f"{graph.canonical_etypes}, manifest says {node_counts} and {rels}"
        )
    parent_counts, parent_rels = dict(schema.ntypes), dict(schema.relations)
    for t in ntypes:
        if t not in parent_counts or got_counts[t] > parent_counts[t]:
            raise ValueError(
                f"{path}: node type {t!r} with {got_counts[t]} nodes does not fit the parent schema {parent_counts}"
            )
    for rel in rels:
        if rel not in parent_rels or graph.num_edges(rel) > parent_rels[rel]:
            raise ValueError(f"{path}: relation {rel} with {graph.num_edges(rel)} edges does not fit the parent schema")


def _read_ids(path: Path, graph: Graph, schema: MetaGraph, owned: dict, ntypes: list, rels: list) -> dict:
    """The part's id maps; entry ``node_ids_<i>`` is for ``ntypes[i]``, ``edge_ids_<j>`` for ``rels[j]`` (the
    manifest's order, the order they were written in)."""
    parent_counts, parent_rels = dict(schema.ntypes), dict(schema.relations)
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not an id-map archive ({err})") from None
    with archive:

        def entry(name, length, bound):
            if name not in archive.files:
                raise ValueError(f"{path}: entry {name!r} is missing")
            arr = archive[name]
            if arr.ndim != 1 or arr.dtype != np.int64 or (length is not None and arr.size != length):
                raise ValueError(
                    f"{path}: entry {name!r} has shape {arr.shape} / dtype {arr.dtype}, expected {length} int64 ids"
                )
            if arr.size and (arr.min() < 0 or arr.max() >= bound):
                raise ValueError(f"{path}: entry {name!r} has ids outside [0, {bound})")
            return torch.from_numpy(arr.copy())

        node_ids, boundary, edge_ids = {}, {}, {}
        for i, t in enumerate(ntypes):
            node_ids[t] = entry(f"node_ids_{i}", graph.num_nodes(t), parent_counts[t])
            if owned[t] > node_ids[t].numel():
                raise ValueError(f"{path}: {owned[t]} owned {t!r} nodes but only {node_ids[t].numel()} nodes")
            b = entry(f"boundary_{i}", None, parent_counts[t])
            if b.numel():
                boundary[t] = b
        for j, rel in enumerate(rels):
            edge_ids[rel] = entry(f"edge_ids_{j}", graph.num_edges(rel), parent_rels[rel])
    return {"node_ids": node_ids, "boundary": boundary, "edge_ids": edge_ids}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
