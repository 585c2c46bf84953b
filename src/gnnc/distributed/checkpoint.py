"""Checkpoints of distributed runs (RAF and vanilla): a file per rank, one replicated file, a manifest.

After epoch ``e`` (``save_checkpoint``, called by every rank) ``DIR`` holds::

    DIR/manifest.json        format, version, method ('raf' / 'vanilla'), world_size, epoch,
                             config (DistTrainer.config), dense (file name), ranks (file per rank)
    DIR/epoch{e}-dense.pt    rank 0: what every rank holds alike (DistTrainer.replicated_state),
                             and the caller's ``extra`` (the launcher's per-epoch report records)
    DIR/epoch{e}-rank{r}.pt  rank r: what rank r alone holds (DistTrainer.rank_state)

Saving starts with a barrier, so no rank writes before every rank finished
the epoch. Each file is written to a temporary name and renamed; after a
second barrier (all files in place) rank 0 renames the new manifest into
place, the commit point, and removes the files of earlier epochs. A save
interrupted at any point leaves the previous checkpoint whole.

``load_checkpoint`` (every rank, on a freshly built trainer) checks the
manifest against the run: world size, method and configuration must match
and every listed file must exist; any difference raises an error naming it.
The directory must be one every rank sees (on several machines, a shared
file system), as the partition directory.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..minibatch import atomic_save, config_differences, read_checkpoint

FORMAT = "gnnc-dist-checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
_OWN_FILE = re.compile(r"epoch\d+-(dense|rank\d+)\.pt(\.tmp)?")


def dense_file(epoch: int) -> str:
    return f"epoch{epoch}-dense.pt"


def rank_file(epoch: int, rank: int) -> str:
    return f"epoch{epoch}-rank{rank}.pt"


def save_checkpoint(trainer, directory, extra=None) -> Path:
    """Write ``trainer``'s checkpoint after its current epoch into ``directory``; every rank calls it.

    ``extra`` (rank 0's, JSON-like) is stored with the replicated state and
    returned by ``load_checkpoint``. Returns the manifest path.
    """
    comm, epoch = trainer.comm, trainer.epoch
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    names = {dense_file(epoch), *(rank_file(epoch, r) for r in range(comm.world))}
    if comm.rank == 0:
        _retire_manifest_listing(directory, names)
    comm.barrier()  # every rank finished the epoch
    atomic_save(trainer.rank_state(), directory / rank_file(epoch, comm.rank))
    if comm.rank == 0:
        replicated = {"epoch": epoch, "state": trainer.replicated_state(), "extra": extra}
        atomic_save(replicated, directory / dense_file(epoch))
    comm.barrier()  # every file is in place
    manifest = directory / MANIFEST
    if comm.rank == 0:
        record = {"format": FORMAT, "version": VERSION, "method": trainer.method, "world_size": comm.world,
                  "epoch": epoch, "config": trainer.config, "dense": dense_file(epoch),
                  "ranks": [rank_file(epoch, r) for r in range(comm.world)]}
        tmp = directory / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, manifest)
        keep = {record["dense"], *record["ranks"]}
        for path in directory.iterdir():
            if _OWN_FILE.fullmatch(path.name) and path.name not in keep:
                path.unlink()
    comm.barrier()  # the manifest is committed on return
    return manifest


def _retire_manifest_listing(directory: Path, names: set) -> None:
    """Remove a manifest listing any of the files about to be overwritten (a new run reusing the directory):
    better no checkpoint than one whose files belong to two runs."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
        listed = {manifest["dense"], *manifest["ranks"]}
    except (OSError, ValueError, KeyError, TypeError):
        return
    if listed & names:
        path.unlink()


def read_manifest(directory) -> dict:
    """The manifest of the checkpoint in ``directory``; FileNotFoundError or ValueError naming the problem."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"resume: no distributed checkpoint at {path}")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError(f"resume: {path} is not a gnnc distributed checkpoint of version {VERSION} "
                         f"(format {manifest.get('format')!r}, version {manifest.get('version')!r})")
    return manifest


def check_manifest(manifest: dict, directory, world: int, method: str, config: dict) -> None:
    """ValueError listing every difference between the checkpoint and this run (world size, method,
    configuration); FileNotFoundError naming the listed files that are missing."""
    directory = Path(directory)
    diff = []
    if manifest["world_size"] != world:
        diff.append(f"world size: checkpoint {manifest['world_size']}, this run {world}")
    if manifest["method"] != method:
        diff.append(f"method: checkpoint {manifest['method']!r}, this run {method!r}")
    diff += config_differences(manifest["config"], config)
    if diff:
        raise ValueError(f"resume: the checkpoint in {directory} (after epoch {manifest['epoch']}) was written by "
                         "a different run:\n  " + "\n  ".join(diff))
    missing = [f"{name} (rank {r})" for r, name in enumerate(manifest["ranks"]) if not (directory / name).is_file()]
    if not (directory / manifest["dense"]).is_file():
        missing.append(f"{manifest['dense']} (replicated state)")
    if missing:
        raise FileNotFoundError(f"resume: the checkpoint in {directory} (after epoch {manifest['epoch']}) lacks "
                                f"files its manifest lists: {', '.join(missing)}")


def load_checkpoint(trainer, directory):
    """Restore ``trainer`` (freshly built, before ``build_cache``) from ``directory``; every rank calls it.

    Returns the ``extra`` given to ``save_checkpoint``.
    """
    comm = trainer.comm
    manifest = read_manifest(directory)
    check_manifest(manifest, directory, comm.world, trainer.method, trainer.config)
    directory = Path(directory)
    dense = read_checkpoint(directory / manifest["dense"])
    own = read_checkpoint(directory / manifest["ranks"][comm.rank])
    for name, epoch in ((manifest["dense"], dense["epoch"]), (manifest["ranks"][comm.rank], own["epoch"])):
        if epoch != manifest["epoch"]:
            raise ValueError(f"resume: {directory / name} holds epoch {epoch}, the manifest epoch {manifest['epoch']}")
    trainer.load_state(dense["state"], own)
    return dense["extra"]
