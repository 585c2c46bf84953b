"""``gnnc datasets download NAME ...``: fetch real datasets into the data folder (``gnnc.data.downloads``)."""

from __future__ import annotations

import argparse

from . import downloads
from .paths import describe_root
from .sources import SOURCES


def _canonical(text: str) -> str:
    return {name.lower(): name for name in SOURCES}.get(text.lower(), text)


def add_download_arguments(parser: argparse.ArgumentParser, list_datasets) -> None:
    """Give ``gnnc datasets`` its ``download NAME ...`` form; without it the command runs ``list_datasets(args)``."""
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
    parser.set_defaults(func=lambda args: run(args, list_datasets, parser))


def run(args, list_datasets, parser: argparse.ArgumentParser) -> int:
    """List the datasets, or download the named ones; usage errors exit through ``parser.error``."""
    if args.action is None:
        status = list_datasets(args)
        print(f"Downloadable (gnnc datasets download NAME, into {describe_root(args.data_dir)}): {', '.join(SOURCES)}")
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
