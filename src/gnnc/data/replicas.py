"""One meaning for a dataset name on the command line: a bare real name means the real files.

``cora``, ``citeseer``, ``aifb``, ``mutag``, ``bgs`` and ``am`` (and FB15k-237, WN18RR:
``gnnc.data.registry.REAL_DATASETS``) name the real files in every command; their synthetic replicas are
``cora-replica``, ``aifb-replica``, ... Every synthetic graph may be named ``<name>-replica``; those without
real files in gnnc (``mag``, ``arxiv``, ...) also by their bare name, as before. Result files written before
keep their names.
"""

from __future__ import annotations

from .registry import DATASETS, REAL_DATASETS

SUFFIX = "-replica"


def label(name: str) -> str:
    """The replica's name for messages: ``'cora'`` -> ``'cora-replica'``."""
    return name.removesuffix(SUFFIX) + SUFFIX


def is_replica(spec: str) -> bool:
    """Whether ``spec`` names a synthetic replica (not real files, not a path)."""
    return spec.endswith(SUFFIX) or (spec in DATASETS and spec not in REAL_DATASETS)


def registry_name(spec: str, command: str) -> str:
    """The ``gnnc.data.synthetic`` name of the replica ``spec``; ValueError saying what to write otherwise."""
    name = spec.removesuffix(SUFFIX)
    if name not in DATASETS:
        raise ValueError(
            f"unknown synthetic graph {spec!r}; choose one of {', '.join(map(label, DATASETS))} "
            f"(`gnnc datasets` lists them)"
        )
    if spec in REAL_DATASETS:
        raise ValueError(
            f"{spec!r} means the real {spec} files, which gnnc {command} does not read; say "
            f"{label(spec)} for its synthetic replica"
        )
    return name
