"""The graph a command line names: a real dataset, a synthetic replica (announced with its scale and size), an
.npz file or a knowledge-graph path."""

from __future__ import annotations

from pathlib import Path

from .. import data
from ..data import paths
from ..data.rdf import RDF_DATASETS
from ..data.registry import REAL_DATASETS
from ..data.replicas import is_replica, label, registry_name
from .arguments import UsageError


def scale_note(scale: float) -> str:
    """``'scale 0.05 (5% of the published size)'`` or ``'scale 1 (the full published size)'``."""
    if scale == 1:
        return "scale 1 (the full published size)"
    return f"scale {scale:g} ({scale * 100:g}% of the published size)"


def replica_name(name: str, command: str) -> str:
    """The ``gnnc.data.synthetic`` name of replica ``name``; a real dataset's bare name is refused."""
    try:
        return registry_name(name, command)
    except ValueError as err:
        raise UsageError(str(err)) from None


def synthetic_replica(name: str, scale: float, command: str, **options):
    """``gnnc.data.synthetic(name, scale, **options)`` for a command line, saying what it builds and how big."""
    name = replica_name(name, command)
    info = data.get_info(name)
    print(
        f"{label(name)}: synthetic replica at {scale_note(scale)}, about {round(info.num_nodes * scale):,} nodes and "
        f"{round(info.num_edges * scale):,} edges; --scale changes it",
        flush=True,
    )
    return data.synthetic(name, scale=scale, **options)


def real_path(name: str, data_dir: str | None) -> Path:
    """The file or folder the loader of real dataset ``name`` reads, by the data-location rule."""
    d = REAL_DATASETS[name]
    subdir = str(Path(d.files[0]).parent) if d.loader != "load_kg" else d.files[0]
    return paths.resolve(None, subdir, f"real dataset {name}", root=data_dir)


def load_graph(spec: str, scale: float, data_dir: str | None, command: str = "info"):
    """A graph named on the command line: .npz path, real dataset name, synthetic name, or a KG path."""
    real = {n.lower(): n for n in REAL_DATASETS}
    if spec.endswith(".npz"):
        return data.load_npz(spec)
    if spec.lower() in real:
        name = real[spec.lower()]
        path = real_path(name, data_dir)
        print(f"{name}: real dataset from {path}", flush=True)
        if name in ("cora", "citeseer"):
            return data.load_planetoid(name, path).graph
        if name in RDF_DATASETS:
            return RDF_DATASETS[name](raw_dir=data_dir, verbose=False)[0]
        return data.load_kg(path).graph
    if spec.endswith((".tar.gz", ".tgz")) or Path(spec).is_dir():
        return data.load_kg(spec).graph
    if is_replica(spec):
        return synthetic_replica(spec, scale, command).graph
    raise UsageError(
        f"unknown graph {spec!r}: give a synthetic name ({', '.join(data.DATASETS)}), "
        f"{'/'.join(REAL_DATASETS)}, or an existing .npz / KG path (`gnnc datasets` lists them)"
    )
