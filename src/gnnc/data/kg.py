"""Knowledge graphs from ``head<TAB>relation<TAB>tail`` triple files (FB15k-237, WN18RR).

Entities and relations are numbered in order of first appearance over the
train, valid and test files (in that order), so the numbering does not
depend on which splits make up the graph.
"""

from __future__ import annotations

import itertools
import operator
import tarfile
from pathlib import Path

import numpy as np
import torch

from ..graph import heterograph
from .dataset import KGDataset
from .integrity import check_file
from .paths import resolve

SPLITS = ("train", "valid", "test")
SHORT_NAMES = ("FB15k-237", "WN18RR")
ENTITY = "entity"
INVERSE_SUFFIX = "_inv"


def load_kg(path, add_inverse: bool = False, splits=SPLITS) -> KGDataset:
    """Load a KG from a folder or ``.tar.gz`` holding train/valid/test ``.txt``.

    ``path`` may also be a short name ('FB15k-237', 'WN18RR') meaning
    ``<data folder>/kg/<name>.tar.gz`` (the folder by ``gnnc.data.paths``'s rule). The graph has node
    type ``'entity'`` and one relation ``(entity, r, entity)`` per KG relation (all of them, even
    those without edges in ``splits``), with the edges of ``splits``; with
    ``add_inverse`` each relation r also gets ``r + '_inv'`` with the edges
    reversed. The graph's relations are in DGL's sorted order, so relation id ``r`` of the triples is
    the graph's relation ``g.etype_id(relations[r])``, not ``r``.
    """
    splits = _check_splits(splits)
    path = _locate(path)
    texts = _read_tarball(path) if path.is_file() else _read_folder(path)
    entities, relations, triples = _parse(texts)
    chosen = torch.cat([triples[s] for s in splits]) if splits else torch.zeros((0, 3), dtype=torch.int64)
    g = _build_graph(chosen, entities, relations, add_inverse, path)
    name = path.name[: -len(".tar.gz")] if path.name.endswith(".tar.gz") else path.name
    return KGDataset(name, g, entities, relations, triples)


def _check_splits(splits) -> tuple[str, ...]:
    if isinstance(splits, str):
        splits = (splits,)
    splits = tuple(splits)
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ValueError(f"unknown KG split(s) {unknown}; choose from {SPLITS}")
    if len(set(splits)) != len(splits):
        raise ValueError(f"KG splits {splits} name a split twice")
    return splits


def _locate(path) -> Path:
    if path is None:
        raise ValueError(f"load_kg needs a folder, a .tar.gz or one of the short names {SHORT_NAMES}")
    if isinstance(path, str) and path in SHORT_NAMES and not Path(path).exists():
        return resolve(None, f"kg/{path}.tar.gz", f"knowledge graph {path!r}")
    return resolve(path, "kg", "knowledge graph")


def _read_folder(folder: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for split in SPLITS:
        file = folder / f"{split}.txt"
        if not file.is_file():
            raise FileNotFoundError(f"knowledge graph folder {folder} has no {split}.txt")
        check_file(file)
        out[split] = (str(file), file.read_text(encoding="utf-8"))
    return out


def _read_tarball(path: Path) -> dict[str, tuple[str, str]]:
    """Split texts read straight from the archive; members may sit in a subfolder."""
    check_file(path)
    try:
        with tarfile.open(path, "r:*") as tar:
            files = [m for m in tar.getmembers() if m.isfile()]
            out = {}
            for split in SPLITS:
                found = [m for m in files if Path(m.name).name == f"{split}.txt"]
                if len(found) != 1:
                    what = "no" if not found else f"{len(found)} ({[m.name for m in found]})"
                    raise ValueError(f"{path}: expected one {split}.txt in the archive, found {what}")
                data = tar.extractfile(found[0]).read()
                out[split] = (f"{path}:{found[0].name}", data.decode("utf-8"))
            return out
    except tarfile.TarError as err:
        raise ValueError(f"{path}: not a readable tar archive ({err})") from None


def _parse(texts: dict[str, tuple[str, str]]):
    """Entity names, relation names and int64 [n, 3] (head, rel, tail) per split."""
    columns = {split: _columns(source, text) for split, (source, text) in texts.items()}
    heads = [h for h, _, _ in columns.values()]
    tails = [t for _, _, t in columns.values()]
    entities = list(
        dict.fromkeys(
            itertools.chain.from_iterable(itertools.chain.from_iterable(zip(h, t)) for h, t in zip(heads, tails))
        )
    )
    relations = list(dict.fromkeys(itertools.chain.from_iterable(r for _, r, _ in columns.values())))
    entity_index = {e: i for i, e in enumerate(entities)}
    relation_index = {r: i for i, r in enumerate(relations)}
    triples = {}
    for split, (h, r, t) in columns.items():
        ids = [
            np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
            for names, index in ((h, entity_index), (r, relation_index), (t, entity_index))
        ]
        triples[split] = torch.from_numpy(np.stack(ids, axis=1) if h else np.zeros((0, 3), dtype=np.int64))
    return entities, relations, triples


def _columns(source: str, text: str) -> tuple[list[str], list[str], list[str]]:
    """Head, relation and tail names of the non-blank lines of one file."""
    lines = text.splitlines()
    kept = [line for line in lines if line.strip()]
    flat = list(map(str.strip, "\t".join(kept).split("\t"))) if kept else []
    if set(map(operator.methodcaller("count", "\t"), kept)) - {2} or "" in flat:
        _raise_first_bad_line(source, lines)
    return flat[0::3], flat[1::3], flat[2::3]


def _raise_first_bad_line(source: str, lines: list[str]):
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(
                f"{source}, line {lineno}: expected 3 tab-separated fields "
                f"(head, relation, tail), got {len(fields)}: {line!r}"
            )
        if not all(f.strip() for f in fields):
            raise ValueError(f"{source}, line {lineno}: empty field in {line!r}")
    raise ValueError(f"{source}: malformed triples")


def _build_graph(triples: torch.Tensor, entities, relations, add_inverse: bool, path: Path):
    names = list(relations)
    if add_inverse:
        inverse = [r + INVERSE_SUFFIX for r in relations]
        clash = sorted(set(inverse) & set(relations))
        if clash:
            raise ValueError(f"{path}: cannot add inverse relations, names {clash[:3]} already exist")
        names += inverse
    heads, rels, tails = triples.numpy().T
    order = np.argsort(rels, kind="stable")
    bounds = np.cumsum(np.bincount(rels, minlength=len(relations)))[:-1]
    per_rel_h, per_rel_t = np.split(heads[order], bounds), np.split(tails[order], bounds)
    data = {
        (ENTITY, r, ENTITY): (torch.from_numpy(h), torch.from_numpy(t))
        for r, h, t in zip(relations, per_rel_h, per_rel_t)
    }
    if add_inverse:
        data.update(
            {
                (ENTITY, r, ENTITY): (torch.from_numpy(t), torch.from_numpy(h))
                for r, h, t in zip(names[len(relations) :], per_rel_h, per_rel_t)
            }
        )
    return heterograph(data, num_nodes={ENTITY: len(entities)})
