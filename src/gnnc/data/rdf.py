"""DGL's RDF datasets (AIFB, MUTAG, BGS, AM) in DGL's shape: ``AIFBDataset()[0]`` is the heterograph.

As DGL 2.1's ``dgl.data.rdf``: the triples of every ``*.nt`` / ``*.n3`` file of the unpacked
``<name>-hetero.zip`` (gzipped ones too), each file's triples once, sorted as rdflib sorts them
(``gnnc.data.ntriples``), are read in that order; each dataset's rules turn a subject and an object into an
entity of a class (its node type) or drop the triple, and a predicate into a relation name. Entities are
numbered in order of first appearance, as are classes and relations; with ``insert_reverse`` each relation
``r`` gets ``rev-r`` holding the edges reversed. Relation ``type`` is renamed ``rdftype`` (and
``rev-type`` ``rev-rdftype``), as DGL does for ``nn.ModuleDict`` keys. Node and relation types are in DGL's
sorted order; ``_ID`` on nodes and edges is their id in that numbering. ``trainingSet.tsv`` and
``testSet.tsv`` (a header, then tab-separated rows whose sample column names an entity and whose last
column is its label) give ``train_mask``, ``test_mask`` and ``label`` (also ``labels``; -1 where unlabelled)
on the ``predict_category`` nodes, labels numbered in order of first appearance (train, then test); a
sample without links is left out (DGL warns), as DGL does.

``raw_dir`` is gnnc's data folder (the one holding ``rdf/``, by ``gnnc.data.paths``' rule); a missing
dataset is downloaded there (``gnnc.data.download``), and files gnnc downloaded are checked against their
sha256 on every load. Where gnnc differs from DGL: nothing is cached (``force_reload`` changes nothing);
input DGL would stop on with an assertion or a KeyError (an IRI of the wrong shape, a labelled sample of
another class, relation names that clash after the renaming, a blank TSV line DGL cannot split) is a
ValueError naming the file and the line, or the blank line is skipped; blank nodes keep the files' labels,
where rdflib draws random ids (so DGL's numbering of AM's blank nodes changes between runs, gnnc's does not).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ..graph import graph
from ..graph.homogeneous import ETYPE, NTYPE, to_heterogeneous
from . import downloads, limits
from .dataset import OneGraphDataset, index_mask
from .integrity import check_file
from .ntriples import BNODE, IRI, LITERAL, read_triples, text
from .paths import data_root

RENAMED = {"type": "rdftype", "rev-type": "rev-rdftype"}  # DGL's RENAME_DICT
SPLIT_FILES = ("trainingSet.tsv", "testSet.tsv")


class RDFGraphDataset(OneGraphDataset):
    """One RDF heterograph as DGL's class of that name builds it; subclasses give the dataset's rules.

    ``parse_entity(term)`` gives ``(class, id)`` or None (drop the triple); ``parse_relation(iri)`` a
    relation name or None; ``process_tuple`` may change the classes; ``SAMPLE_COLUMN`` is the TSV column
    naming the labelled entity. A rule's ValueError is reported with the file and line.
    """

    NAME = ""
    PREDICT_CATEGORY = ""
    SAMPLE_COLUMN = 0

    def __init__(
        self, print_every=10000, insert_reverse=True, raw_dir=None, force_reload=False, verbose=True, transform=None
    ):
        self.name, self.raw_dir, self.verbose = f"{self.NAME}-hetero", raw_dir, verbose
        folder = data_root(raw_dir) / "rdf" / self.name
        if not folder.is_dir():
            downloads.download(self.NAME, raw_dir, progress=verbose)
        super().__init__(*self._load(folder, insert_reverse), transform)
        if verbose:
            hg, cat = self._graph, self.predict_category
            print(
                f"  {self.name}: {hg.num_nodes()} nodes of {len(hg.ntypes)} types, {hg.num_edges()} edges of "
                f"{len(hg.canonical_etypes)} relations; {self.num_classes} classes on {cat!r} "
                f"({int(hg.nodes[cat].data['train_mask'].sum())} train, "
                f"{int(hg.nodes[cat].data['test_mask'].sum())} test)"
            )

    @property
    def predict_category(self) -> str:
        return self.PREDICT_CATEGORY

    # ------------------------------------------------------------------ the dataset's rules
    def parse_entity(self, term: tuple) -> tuple[str | None, str] | None:
        raise NotImplementedError

    def parse_relation(self, iri: str) -> str | None:
        raise NotImplementedError

    def process_tuple(self, predicate: str, sbj, rel: str, obj):
        """(subject, object) entities to keep, or None to drop the triple (both given, not None)."""
        return sbj, obj

    # ------------------------------------------------------------------ DGL's processing
    def _load(self, folder: Path, insert_reverse: bool):
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.removesuffix(".gz").endswith(("nt", "n3")))
        if not files:
            raise FileNotFoundError(
                f"{folder}: no N-Triples file (*.nt, *.n3); run `gnnc datasets download {self.NAME}`"
            )
        triples = []
        for path in files:
            triples.extend((t, path, line) for t, line in read_triples(path).items())
        triples.sort(key=lambda item: item[0])
        entities, ntid, classes, relations = {}, [], {}, {}
        src, dst, etid = [], [], []
        for (s, p, o), path, line in triples:
            try:
                kept = self._entities(s, p, o)
            except ValueError as err:
                raise ValueError(f"{path}, line {line}: {err}") from None
            if kept is None:
                continue
            (sbj, obj), rel = kept
            s_cls, o_cls = _number(classes, sbj[0]), _number(classes, obj[0])
            rel_id = _number(relations, rel)
            for ent, cls in ((sbj, s_cls), (obj, o_cls)):
                key = f"{ent[0]}/{ent[1]}"
                if key not in entities:
                    entities[key] = len(entities)
                    ntid.append(cls)
            src.append(entities[f"{sbj[0]}/{sbj[1]}"])
            dst.append(entities[f"{obj[0]}/{obj[1]}"])
            etid.append(rel_id)
        if not src:
            raise ValueError(f"{folder}: none of the triples makes an edge under {type(self).__name__}'s rules")
        hg = self._graph(folder, entities, ntid, list(classes), list(relations), src, dst, etid, insert_reverse)
        return self._labelled(hg, folder, entities)

    def _entities(self, s, p, o):
        """((subject, object), relation) of a triple under the rules, or None to drop it."""
        sbj, rel, obj = self.parse_entity(s), self.parse_relation(p[1]), self.parse_entity(o)
        if sbj is None or rel is None or obj is None:
            return None
        kept = self.process_tuple(p[1], list(sbj), rel, list(obj))
        return None if kept is None else (kept, rel)

    def _graph(self, folder, entities, ntid, ntypes, etypes, src, dst, etid, insert_reverse):
        for count, name in ((len(entities), "nodes"), (len(src), "edges")):
            limits.check_count(count, name, folder)
        src, dst, etid = (np.asarray(a, dtype=np.int64) for a in (src, dst, etid))
        if insert_reverse:
            src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
            etid = np.concatenate([etid, etid + len(etypes)])
            etypes = etypes + [f"rev-{t}" for t in etypes]
        etypes = [RENAMED.get(t, t) for t in etypes]
        twice = sorted({t for t in etypes if etypes.count(t) > 1})
        if twice:
            raise ValueError(
                f"{folder}: relation names {twice[:3]} stand for two relations after DGL's renaming "
                f"(rev-<r> for reverse edges, type -> rdftype); DGL would merge them"
            )
        g = graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=len(entities))
        g.ndata[NTYPE] = torch.tensor(ntid, dtype=torch.int64)
        g.edata[ETYPE] = torch.from_numpy(etid)
        return to_heterogeneous(g, ntypes, etypes)

    def _labelled(self, hg, folder: Path, entities: dict[str, int]):
        cat = self.predict_category
        if cat not in hg.ntypes:
            raise ValueError(f"{folder}: no entity of class {cat!r}, the category DGL predicts")
        local = {int(g): i for i, g in enumerate(hg.nodes[cat].data["_ID"].tolist())}
        num = hg.num_nodes(cat)
        labels = torch.full((num,), -1, dtype=torch.int64)
        names: dict[str, int] = {}
        masks = []
        for split in SPLIT_FILES:
            idx = []
            for sample, label, where in self._samples(folder / split):
                try:
                    ent = self.parse_entity((IRI, sample))
                except ValueError as err:
                    raise ValueError(f"{where}: {err}") from None
                key = "None" if ent is None else f"{ent[0]}/{ent[1]}"
                if key not in entities:
                    if self.verbose:
                        print(f'Warning: entity "{key}" does not have any valid links associated. Ignored.')
                    continue
                if entities[key] not in local:
                    raise ValueError(f"{where}: sample {sample!r} is entity {key!r}, not a {cat!r}")
                idx.append(local[entities[key]])
                labels[idx[-1]] = _number(names, label)
            masks.append(index_mask(num, idx))
        hg.nodes[cat].data["train_mask"], hg.nodes[cat].data["test_mask"] = masks
        hg.nodes[cat].data["labels"] = labels
        hg.nodes[cat].data["label"] = labels
        return hg, len(names)

    def _samples(self, path: Path):
        """(sample, label, 'file, line N') of each row after the header."""
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; run `gnnc datasets download {self.NAME}`")
        check_file(path)
        limit = limits.LIMITS.max_text_line
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(iter(lambda: f.readline(limit + 1), ""), 1):
                where = f"{path}, line {lineno}"
                if len(line) > limit:
                    raise ValueError(f"{where}: longer than {limit:,} characters")
                if lineno == 1 or not line.strip():
                    continue
                fields = line.strip().split("\t")
                if len(fields) != 3:
                    raise ValueError(f"{where}: expected 3 tab-separated fields, got {len(fields)}: {line!r}")
                yield fields[self.SAMPLE_COLUMN], fields[2], where


def _number(ids: dict, key) -> int:
    """``key``'s number in ``ids``, in order of first appearance (DGL's ``_get_id``)."""
    return ids.setdefault(key, len(ids))


def _parts(iri: str, count: int, what: str) -> list[str]:
    parts = iri.split("/")
    if len(parts) != count:
        raise ValueError(f"{what} <{iri}> has {len(parts)} '/'-separated parts; DGL's rule expects {count}")
    return parts


class AIFBDataset(RDFGraphDataset):
    """AIFB: 7,262 nodes of 7 types, 48,810 edges (with reverses), 4 classes on ``Personen`` (140 / 36)."""

    NAME, PREDICT_CATEGORY = "aifb", "Personen"
    ENTITY_PREFIX, RELATION_PREFIX = "http://www.aifb.uni-karlsruhe.de/", "http://swrc.ontoware.org/"
    DROPPED = ("http://swrc.ontoware.org/ontology#employs", "http://swrc.ontoware.org/ontology#affiliation")

    def parse_entity(self, term):
        if term[0] == LITERAL:
            return "_Literal", text(term)
        if term[0] == BNODE or not term[1].startswith(self.ENTITY_PREFIX):
            return None
        parts = term[1].split("/")
        if len(parts) < 6:
            raise ValueError(f"entity <{term[1]}> has {len(parts)} '/'-separated parts; DGL's rule reads the sixth")
        return parts[3], parts[5]

    def parse_relation(self, iri):
        if iri in self.DROPPED:
            return None
        return iri.split("/")[3] if iri.startswith(self.RELATION_PREFIX) else iri.split("/")[-1]


class MUTAGDataset(RDFGraphDataset):
    """MUTAG: 27,163 nodes of 5 types, 148,100 edges (with reverses), 2 classes on ``d`` (272 / 68)."""

    NAME, PREDICT_CATEGORY = "mutag", "d"
    PREFIX = "http://dl-learner.org/carcinogenesis#"
    DROPPED = (PREFIX + "isMutagenic",)
    D_ENTITY, BOND_ENTITY = re.compile("d[0-9]"), re.compile("bond[0-9]")

    def parse_entity(self, term):
        if term[0] == LITERAL:
            return "_Literal", text(term)
        if term[0] == BNODE or not term[1].startswith(self.PREFIX):
            return None
        inst = term[1][len(self.PREFIX) :]
        cls = "d" if self.D_ENTITY.match(inst) else "bond" if self.BOND_ENTITY.match(inst) else None
        return cls, inst

    def parse_relation(self, iri):
        if iri in self.DROPPED:
            return None
        return iri[len(self.PREFIX) :] if iri.startswith(self.PREFIX) else iri.split("/")[-1]

    def process_tuple(self, predicate, sbj, rel, obj):
        if not predicate.startswith(self.PREFIX):
            obj[0] = "SCHEMA"
            if sbj[0] is None:
                sbj[0] = "SCHEMA"
        if obj[0] is None:
            obj[0] = rel
        if sbj[0] is None:
            raise ValueError(f"subject {sbj[1]!r} is neither a d<n> nor a bond<n> entity (DGL asserts it is)")
        return sbj, obj


class BGSDataset(RDFGraphDataset):
    """BGS: 94,806 nodes of 27 types, 672,884 edges (with reverses), 2 classes on ``Lexicon/NamedRockUnit``
    (117 / 29)."""

    NAME, PREDICT_CATEGORY, SAMPLE_COLUMN = "bgs", "Lexicon/NamedRockUnit", 1
    ENTITY_PREFIX, STATUS_PREFIX = "http://data.bgs.ac.uk/", "http://data.bgs.ac.uk/ref/CurrentStatus"
    RELATION_PREFIX = "http://data.bgs.ac.uk/ref"
    DROPPED = ("http://data.bgs.ac.uk/ref/Lexicon/hasLithogenesis",)

    def parse_entity(self, term):
        if term[0] != IRI or term[1].startswith(self.STATUS_PREFIX) or not term[1].startswith(self.ENTITY_PREFIX):
            return None
        parts = term[1].split("/")
        return (f"{parts[4]}/{parts[5]}", parts[6]) if len(parts) == 7 else None

    def parse_relation(self, iri):
        if iri in self.DROPPED:
            return None
        if not iri.startswith(self.RELATION_PREFIX):
            return iri.replace(".", "_")
        if len(iri.split("/")) < 6:
            return None
        parts = _parts(iri, 6, "relation")
        return f"{parts[4]}/{parts[5]}"


class AMDataset(RDFGraphDataset):
    """AM: 881,680 nodes of 7 types, 5,668,682 edges (with reverses), 11 classes on ``proxy`` (802 / 198)."""

    NAME, PREDICT_CATEGORY = "am", "proxy"
    PREFIX = "http://purl.org/collections/nl/am/"
    DROPPED = (PREFIX + "objectCategory", PREFIX + "material")

    def parse_entity(self, term):
        if term[0] == BNODE:
            return "_BNode", term[1]
        if term[0] == LITERAL or not term[1].startswith(self.PREFIX):
            return None
        name = _parts(term[1], 7, "entity")[6].split("-")
        return (name[0], name[1]) if len(name) == 2 else ("TYPE", str(name))  # DGL: the list as the id

    def parse_relation(self, iri):
        if iri in self.DROPPED:
            return None
        return _parts(iri, 7, "relation")[6] if iri.startswith(self.PREFIX) else iri.replace(".", "_")


RDF_DATASETS = {cls.NAME: cls for cls in (AIFBDataset, MUTAGDataset, BGSDataset, AMDataset)}


def processing_note(name: str) -> str | None:
    """How the RDF set ``name`` is processed, for ``gnnc info``; None for other names."""
    cls = RDF_DATASETS.get(name.lower())
    if cls is None:
        return None
    return (
        f"processing: as DGL 2.1's {cls.__name__} (gnnc.data.{cls.__name__}(), dgl.data.{cls.__name__} through "
        f"the alias): entities numbered in rdflib's order of the triples, a rev-<r> relation reversing each "
        f"relation r, type renamed rdftype; label, train_mask and test_mask on {cls.PREDICT_CATEGORY!r}; no "
        f"node features (models embed the node ids)"
    )
