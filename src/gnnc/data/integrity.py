"""The sha256 of every file gnnc downloaded, recorded beside the data and checked before a loader parses it.

The data folder's lock file ``gnnc-sha256.lock`` (``sha256sum``'s format: ``<digest>  <path in the data
folder>``, so ``sha256sum -c`` reads it too) names each file ``gnnc.data.download`` placed there: the files
it fetched (pinned in ``gnnc.data.sources``, or trusted on first use) and the members of the archives it
unpacked. ``check_file(path)`` finds the nearest lock file above ``path``; when that lock names the file,
its sha256 must be the pinned one (else the recorded one), or ``ChecksumError`` says in one line which
file, both digests and the command that fetches it again. A file no lock names (a user's own copy,
``../shared/data``) is not checked. A digest is computed once per process for each (path, size, mtime,
inode), so checking on every load costs one read of each file per process.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

from .sources import owner

LOCK_NAME = "gnnc-sha256.lock"

_digests: dict[tuple, str] = {}
_locks: dict[tuple, dict[str, str]] = {}


class DownloadError(OSError):
    """A dataset file could not be fetched; the message is one line saying what to do."""


class ChecksumError(DownloadError):
    """A dataset file's sha256 is not the pinned or recorded one."""


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns, st.st_ino)


def sha256(path) -> str:
    """The file's sha256 (hex), computed once per process while its size, mtime and inode stay the same."""
    path = Path(os.path.abspath(path))
    key = _stamp(path)
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def read_lock(folder) -> dict[str, str]:
    """``{path in the data folder: sha256}`` recorded in ``folder``'s lock file (empty without one)."""
    lock = Path(folder) / LOCK_NAME
    if not lock.is_file():
        return {}
    key = _stamp(Path(os.path.abspath(lock)))
    if key not in _locks:
        records = {}
        for lineno, line in enumerate(lock.read_text().splitlines(), 1):
            if line.strip():
                digest, sep, path = line.partition("  ")
                if not sep or len(digest) != 64:
                    raise ValueError(f"{lock}, line {lineno}: expected '<sha256>  <path>', got {line!r}")
                records[path] = digest
        _locks[key] = records
    return _locks[key]


def record(folder, digests: dict[str, str]) -> None:
    """Add (or replace) ``{path in the data folder: sha256}`` in ``folder``'s lock file."""
    merged = {**read_lock(folder), **digests}
    lock = Path(folder) / LOCK_NAME
    part = lock.with_name(lock.name + ".part")
    part.write_text("".join(f"{digest}  {path}\n" for path, digest in merged.items()))
    part.replace(lock)


def expected(folder: Path, relative: str) -> tuple[str, str] | None:
    """(sha256, where it comes from) that the file ``relative`` to data folder ``folder`` must have: the pinned
    one, else the one the lock records; None for a file neither names."""
    found = owner(relative)
    if found is not None and found[1].path == relative and found[1].sha256 is not None:
        return found[1].sha256, "pinned in gnnc.data.sources"
    want = read_lock(folder).get(relative)
    return None if want is None else (want, f"recorded in {folder / LOCK_NAME}")


def check_file(path) -> None:
    """ChecksumError when ``path`` is a downloaded file (a lock file above it names it) whose sha256 differs."""
    path = Path(os.path.abspath(path))
    for folder in path.parents:
        if (folder / LOCK_NAME).is_file():
            relative = PurePosixPath(path.relative_to(folder)).as_posix()
            want = expected(folder, relative)
            if want is not None and sha256(path) != want[0]:
                raise ChecksumError(mismatch(path, relative, want))
            return


def mismatch(path: Path, relative: str, want: tuple[str, str]) -> str:
    """The one-line message for a file whose sha256 is not ``want`` (digest, origin)."""
    found = owner(relative)
    command = f"gnnc datasets download {found[0].name if found else 'NAME'}"
    return (
        f"{path}: sha256 {sha256(path)} is not the {want[0]} {want[1]}; the file changed after it was "
        f"downloaded. Run `{command}` to fetch it again"
    )
