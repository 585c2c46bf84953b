"""Fetch a real dataset into the data folder: checked, resumable, with a progress bar.

``download(name)`` fetches every file of ``gnnc.data.sources.SOURCES[name]`` that is not already in the
data folder (``gnnc.data.paths``'s rule) and checks each against its sha256: the pinned one, else the
one the lock file ``gnnc-sha256.lock`` in the data folder recorded on the first download (trust on first
use, printed on stderr). Every file it places is recorded in that lock, the members of the archives it
unpacks included, and ``gnnc.data.integrity`` checks them before every later load. A file already there
whose digest differs is set aside (``<file>.bad``) and fetched again; an archive whose unpacked members
changed is unpacked again. A transfer that breaks leaves ``<file>.part``; the next call asks the server
for the rest (HTTP Range) and appends it. A wrong digest after a fetch deletes the download and raises
``ChecksumError``; an unreachable source raises ``DownloadError`` whose one line names the command and
the folder. ``verify(name)`` checks files already there the same way.

``mirror`` (or ``$GNNC_DATA_MIRROR``) replaces the canonical URLs by ``<mirror>/<path in the data
folder>``: a local copy, or the test suite's HTTP server.
"""

from __future__ import annotations

import os
import sys
import tarfile
import zipfile
from http.client import HTTPException
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from .. import progress as bars
from . import paths
from .integrity import LOCK_NAME, ChecksumError, DownloadError, expected, read_lock, record, sha256
from .sources import RemoteFile, Source, get_source

MIRROR_ENV = "GNNC_DATA_MIRROR"
TIMEOUT_S = 60
CHUNK = 1 << 16


def download(name: str, root=None, mirror: str | None = None, progress: bool = True) -> Path:
    """Fetch dataset ``name`` into the data folder (``root``, else ``gnnc.data.paths``'s rule); return the folder.

    Files already there are checked, not fetched again unless they changed; archives are unpacked once
    checked, and again when their members changed.
    """
    source = get_source(name)
    folder = paths.data_root(root)
    mirror = mirror or os.environ.get(MIRROR_ENV)
    for remote in source.files:
        target = folder / remote.path
        want = expected(folder, remote.path)
        if target.is_file() and want is not None and sha256(target) != want[0]:
            _set_aside(target)
        if not target.is_file():
            url = f"{mirror.rstrip('/')}/{remote.path}" if mirror else remote.url
            _fetch(source, url, target, progress, folder)
        _record(remote, _check(remote, target, folder), folder)
        if remote.unpack:
            _unpack(target, folder, remote.unpack)
    return folder


def verify(name: str, root=None) -> Path:
    """Check the files of ``name`` already in the data folder against their sha256; return the folder.

    DownloadError naming the command when a file is missing; ChecksumError when one differs.
    """
    source = get_source(name)
    folder = paths.data_root(root)
    for remote in source.files:
        target = folder / remote.path
        if not target.is_file():
            raise DownloadError(f"{source.name}: {target} is missing; {_hint(source, folder)}")
        _check(remote, target, folder)
    return folder


def is_present(name: str, root=None) -> bool:
    """Whether every file of ``name`` is in the data folder (unchecked)."""
    folder = paths.data_root(root)
    return all((folder / remote.path).is_file() for remote in get_source(name).files)


def _hint(source: Source, folder: Path) -> str:
    return f"run `gnnc datasets download {source.name}` (files go to {folder}), or put the files there"


def _fetch(source: Source, url: str, target: Path, progress: bool, folder: Path) -> None:
    """Download ``url`` to ``target`` via ``<target>.part``, resuming a part left by a broken transfer."""
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.is_file() else 0
    request = Request(url, headers={"User-Agent": "gnnc", **({"Range": f"bytes={have}-"} if have else {})})
    try:
        response = urlopen(request, timeout=TIMEOUT_S)
    except HTTPError as err:
        if err.code == 416 and have:  # the part already holds the whole file
            part.replace(target)
            return
        raise DownloadError(
            f"{source.name}: {url} answered HTTP {err.code} {err.reason}; {_hint(source, folder)}"
        ) from None
    except (URLError, OSError, HTTPException) as err:
        reason = getattr(err, "reason", err)
        raise DownloadError(
            f"{source.name}: cannot reach {url} ({reason}); offline? When online, {_hint(source, folder)}"
        ) from None
    with response:
        if have and response.status != 206:  # the server ignored the Range: start over
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length else None
        with (
            open(part, "ab" if have else "wb") as out,
            bars.bar(
                total=total,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=target.name,
                leave=False,
                disable=not progress,
            ) as bar,
        ):
            try:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    bar.update(len(chunk))
            except (OSError, HTTPException) as err:
                raise DownloadError(_cut(source, url, part, total, err)) from None
    if total is not None and part.stat().st_size < total:
        raise DownloadError(_cut(source, url, part, total, "connection closed"))
    part.replace(target)


def _cut(source: Source, url: str, part: Path, total, why) -> str:
    return (
        f"{source.name}: the transfer of {url} broke after {part.stat().st_size:,} of {total or '?'} bytes "
        f"({why}); run `gnnc datasets download {source.name}` again to resume from {part}"
    )


def _set_aside(target: Path) -> Path:
    bad = target.with_name(target.name + ".bad")
    target.replace(bad)
    return bad


def _check(remote: RemoteFile, target: Path, folder: Path) -> str:
    """``target``'s sha256, when it is the pinned or recorded one (or neither exists); else the file is set
    aside and ChecksumError raised."""
    got, want = sha256(target), expected(folder, remote.path)
    if want is not None and got != want[0]:
        bad = _set_aside(target)
        raise ChecksumError(
            f"{target}: sha256 {got} is not the {want[0]} {want[1]}; moved it to {bad}. "
            f"Run `gnnc datasets download` again; if it persists the source changed the file"
        )
    return got


def _record(remote: RemoteFile, digest: str, folder: Path) -> None:
    """Record a downloaded file in the lock; say so when nothing pinned it (trust on first use)."""
    recorded = read_lock(folder).get(remote.path)
    if remote.sha256 is None and recorded is None:
        print(
            f"gnnc: {remote.path} has no published sha256; trusting this copy: sha256 {digest}, recorded in "
            f"{folder / LOCK_NAME} and checked on every later load",
            file=sys.stderr,
        )
    if recorded != digest:
        record(folder, {remote.path: digest})


def _unpack(archive: Path, folder: Path, unpack: str) -> None:
    """Extract a checked ``.zip`` / ``.tgz`` / ``.tar.gz`` into ``folder / unpack`` and record its members'
    sha256 in the lock; a marker file lists the members, and a later call extracts again only when one of
    them is missing or changed."""
    marker = archive.with_name(archive.name + ".unpacked")
    members = marker.read_text().splitlines() if marker.is_file() else []
    recorded = read_lock(folder)
    if members and all((folder / m).is_file() and sha256(folder / m) == recorded.get(m) for m in members):
        return
    into = folder / unpack
    into.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            names = [name for name in z.namelist() if not name.endswith("/")]
            for name in names:
                _inside(into, name, archive)
            z.extractall(into)
    else:
        with tarfile.open(archive) as t:
            names = [m.name for m in t.getmembers() if m.isfile()]
            t.extractall(into, filter="data")
    members = [Path(os.path.normpath(into / name)).relative_to(folder).as_posix() for name in names]
    record(folder, {m: sha256(folder / m) for m in members})
    marker.write_text("".join(f"{m}\n" for m in members))


def _inside(into: Path, member: str, archive: Path) -> None:
    if not (into / member).resolve().is_relative_to(into.resolve()):
        raise ValueError(f"{archive}: member {member!r} would land outside {into}; not unpacking it")
