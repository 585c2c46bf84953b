"""Checkpoint files a resume can trust: a sha256 per file, two generations, errors naming file and cause.

A *generation* is what one save writes: its files (``write_file``, each
``torch.save``d to a temporary name, synced and renamed) and a manifest
``DIR/manifest-epoch{e}.json`` listing every file with its size and sha256.
Renaming the manifest into place commits the generation (``commit``); only
then are generations older than the previous one removed, so a save cut
short at any point leaves the previous generation whole.

On resume ``generations`` gives the manifests newest first and
``read_file`` checks a file's size and sha256 before unpickling it
(``weights_only``). A generation that fails a check is reported by a
``CheckpointWarning`` naming the file and the cause and the previous one is
tried; ``CheckpointError`` (a ValueError) lists every cause when none is
whole. ``retire`` drops generations a new run is about to overwrite.
Write failures are OSErrors naming the file and the cause (disk full,
permission, read-only file system); ``check_writable`` finds them before a
run spends an epoch.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import warnings
from pathlib import Path

import torch

_MANIFEST = re.compile(r"manifest-epoch(\d+)\.json")
_CAUSES = {
    errno.ENOSPC: "disk full (no space left on device)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOTDIR: "a path component is not a directory",
}


class CheckpointError(ValueError):
    """No generation of a checkpoint is whole; the message lists each file and its cause."""


class CheckpointWarning(UserWarning):
    """The newest generation failed its check; the previous one is used."""


def manifest_name(epoch: int) -> str:
    return f"manifest-epoch{epoch}.json"


def cause(err: OSError) -> str:
    """A reader's words for an OSError: 'disk full', 'permission denied', ... or its strerror."""
    return _CAUSES.get(err.errno, err.strerror or str(err))


def write_error(path, action: str, err: OSError) -> OSError:
    """An OSError (same errno) saying that ``action`` on ``path`` failed and why."""
    return OSError(err.errno, f"cannot {action} checkpoint {path}: {cause(err)}")


def check_writable(directory) -> Path:
    """Create ``directory`` if needed and write, sync and remove a probe file there; OSError naming the
    directory and the cause (permission, read-only, disk full) when that fails."""
    directory = Path(directory)
    probe = directory / f".write-probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as f:
            f.write(b"\0" * 4096)
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()
    except OSError as err:
        raise write_error(directory, "write into", err) from err
    return directory


class _Hashing:
    """A write-only file wrapper counting and hashing what passes through to ``into``'s file."""

    def __init__(self):
        self.f, self.sha, self.bytes = None, hashlib.sha256(), 0

    def into(self, f) -> _Hashing:
        self.f = f
        return self

    def write(self, data) -> int:
        self.f.write(data)
        self.sha.update(data)
        self.bytes += len(data)
        return len(data)

    def flush(self) -> None:
        self.f.flush()


def _replace_synced(path: Path, write) -> None:
    """``write(f)`` into a temporary file beside ``path``, synced, then renamed to ``path``; OSError naming
    ``path`` and the cause on failure (the temporary file is removed)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise write_error(path, "write", err) from err


def write_file(obj, path) -> dict:
    """``torch.save(obj)`` to ``path`` through a synced temporary file and a rename.

    Returns the manifest entry ``{"bytes", "sha256"}``; OSError naming the file and the cause on failure.
    """
    hashed = _Hashing()
    _replace_synced(Path(path), lambda f: torch.save(obj, hashed.into(f)))
    return {"bytes": hashed.bytes, "sha256": hashed.sha.hexdigest()}


def retire(directory, epoch: int) -> None:
    """Remove the manifests of generations ``epoch`` and later (a new run reusing the directory is about to
    overwrite their files): better no checkpoint than one whose files belong to two runs."""
    for e, path in generations(directory):
        if e >= epoch:
            path.unlink(missing_ok=True)


def commit(directory, epoch: int, record: dict, owned: re.Pattern) -> Path:
    """Write ``record`` as generation ``epoch``'s manifest (the commit point), then remove every generation
    but this one and the previous, and files matching ``owned`` that no kept manifest lists."""
    directory = Path(directory)
    path = directory / manifest_name(epoch)
    _replace_synced(path, lambda f: f.write(json.dumps(record, indent=1).encode()))
    kept = [p for e, p in generations(directory) if e <= epoch][:2]
    listed = set()
    for p in kept:
        listed |= set(_listed(p))
    for e, p in generations(directory):
        if p not in kept:
            p.unlink(missing_ok=True)
    for p in directory.iterdir():
        if owned.fullmatch(p.name) and p.name not in listed:
            p.unlink(missing_ok=True)
    return path


def _listed(manifest: Path) -> dict:
    try:
        return json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def generations(directory) -> list[tuple[int, Path]]:
    """(epoch, manifest path) of every generation in ``directory``, newest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _MANIFEST.fullmatch(p.name))]
    return sorted(found, reverse=True)


def read_manifest(path: Path) -> dict:
    """The JSON object in ``path``; CheckpointError naming the file and the cause."""
    try:
        record = json.loads(Path(path).read_text())
    except OSError as err:
        raise CheckpointError(f"{path}: unreadable ({cause(err)})") from None
    except ValueError as err:
        raise CheckpointError(f"{path}: not a complete manifest (truncated or corrupt: {err})") from None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        raise CheckpointError(f"{path}: not a gnnc checkpoint manifest (no file list)")
    return record


def read_file(path, entry) -> dict:
    """The object in ``path`` after its size and sha256 matched ``entry`` (from the manifest), tensors on
    the CPU; CheckpointError naming the file and the cause (missing, truncated, corrupt, unreadable)."""
    path = Path(path)
    try:
        data = path.read_bytes()
        expected, digest = int(entry["bytes"]), str(entry["sha256"])
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing") from None
    except OSError as err:
        raise CheckpointError(f"{path}: unreadable ({cause(err)})") from None
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path}: its manifest entry {entry!r} lacks the size or sha256") from None
    if len(data) < expected:
        raise CheckpointError(f"{path}: truncated ({len(data)} of {expected} bytes)")
    if len(data) > expected:
        raise CheckpointError(f"{path}: {len(data)} bytes, the manifest lists {expected}")
    found = hashlib.sha256(data).hexdigest()
    if found != digest:
        raise CheckpointError(f"{path}: corrupt (sha256 {found}, the manifest lists {digest})")
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def newest_whole(directory, read):
    """``read(manifest record)`` of the newest generation whose files pass their checks.

    ``read`` raises CheckpointError for a broken file; the generation before is then tried, with a
    CheckpointWarning. FileNotFoundError when ``directory`` holds no generation, CheckpointError listing
    every cause when none is whole.
    """
    found = generations(directory)
    if not found:
        raise FileNotFoundError(f"resume: no checkpoint in {directory} (no manifest-epoch<N>.json)")
    problems = []
    for i, (_, path) in enumerate(found):
        try:
            return read(read_manifest(path))
        except CheckpointError as err:
            problems.append(str(err))
            fall_back(err, found[i + 1][1] if i + 1 < len(found) else None)
    raise CheckpointError(f"resume: no whole checkpoint in {directory}:\n  " + "\n  ".join(problems))


def fall_back(problem: CheckpointError, previous: Path | None) -> None:
    """Warn that ``problem`` sends the resume to the generation of ``previous`` (None: there is none)."""
    if previous is not None:
        warnings.warn(
            CheckpointWarning(f"resume: {problem}; using the previous generation ({previous.name})"), stacklevel=3
        )
