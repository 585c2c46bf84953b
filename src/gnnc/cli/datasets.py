"""``gnnc datasets``: list the synthetic generators and real-data loaders (and which files exist);
``gnnc datasets download NAME ...`` fetches real datasets into the data folder (``gnnc.data.downloads``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import data
from ..data import downloads, paths
from ..data.registry import REAL_DATASETS
from ..data.replicas import label
from ..data.sources import SOURCES
from .arguments import DATA_DIR_HELP


def _canonical(text: str) -> str:
    return {name.lower(): name for name in SOURCES}.get(text.lower(), text)


def add_parser(subparsers) -> None:
    """Add the ``datasets`` command, with its ``download NAME ...`` form, to ``gnnc``'s subparsers."""
    parser = subparsers.add_parser(
        "datasets",
        help="list synthetic generators and real-data loaders, and which files exist; "
        "`gnnc datasets download NAME` fetches a real dataset",
    )
    parser.add_argument("--data-dir", help=DATA_DIR_HELP)
    parser.add_argument(
        "action",
        nargs="?",
        choices=["download"],
        help="download: fetch the named datasets (checked against their sha256, resumable)",
    )
    parser.add_argument(
        "names", nargs="*", type=_canonical, metavar="NAME", help=f"with download: one or more of {', '.join(SOURCES)}"
    )
    parser.add_argument(
        "--mirror",
        metavar="URL",
        help=f"with download: fetch <URL>/<path in the data folder> instead of the canonical "
        f"sources (also ${downloads.MIRROR_ENV})",
    )
    parser.set_defaults(func=lambda args: cmd_datasets(args, parser))


def cmd_datasets(args, parser: argparse.ArgumentParser) -> int:
    """List the datasets, or download the named ones; usage errors exit through ``parser.error``."""
    if args.action is None:
        status = list_datasets(args.data_dir)
        root = paths.describe_root(args.data_dir)
        print(f"Downloadable (gnnc datasets download NAME, into {root}): {', '.join(SOURCES)}")
        return status
    unknown = [name for name in args.names if name not in SOURCES]
    if unknown or not args.names:
        parser.error(
            f"name datasets to download from {', '.join(SOURCES)}"
            + (f"; no download for {', '.join(unknown)}" if unknown else "")
        )
    for name in args.names:
        folder = downloads.download(name, args.data_dir, mirror=args.mirror)
        files = SOURCES[name].files
        print(
            f"{name}: {len(files)} file{'s' if len(files) > 1 else ''} in {folder}, sha256 checked "
            f"({SOURCES[name].about})"
        )
    return 0


def list_datasets(data_dir: str | None) -> int:
    """Print the synthetic replicas with their full-scale figures, and the real-data loaders with their files'
    state under the data folder."""
    print("Synthetic replicas (gnnc.data.synthetic(name, scale=1.0, seed=0)); full-scale figures:")
    print(f"  {'name':<16} {'kind':<14} {'nodes':>11} {'edges':>12} {'ntypes':>6} {'rels':>5} {'feat':>5}  source")
    for d in data.list_datasets():
        print(
            f"  {label(d.name):<16} {d.kind:<14} {d.num_nodes:>11,} {d.num_edges:>12,} {d.num_ntypes:>6} "
            f"{d.num_relations:>5} {d.feat_dim:>5}  {d.paper}"
        )
    root = paths.data_root(data_dir)
    print(
        f"Real-data loaders (files under {paths.describe_root(data_dir)}); as a graph name, cora and "
        f"citeseer mean these files in every command (their replicas: cora-replica, citeseer-replica):"
    )
    for d in REAL_DATASETS.values():
        missing = d.missing(root)
        state = (
            "found"
            if not missing
            else "absent"
            if len(missing) == len(d.files)
            else f"incomplete, missing {', '.join(Path(m).name for m in missing)}"
        )
        print(f"  {d.name:<10} gnnc.data.{d.loader:<15} {d.pattern:<24} {state:<7} {d.figures}")
    return 0
