"""Checkpoints of distributed runs (RAF and vanilla): a file per rank, one replicated file, a manifest.

After epoch ``e`` (``save_checkpoint``, called by every rank) ``DIR`` holds
one generation of ``gnnc.checkpoints``::

    DIR/manifest-epoch{e}.json  format, version, method ('raf' / 'vanilla'), world_size, epoch,
                                config (DistTrainer.config), dense (file name), ranks (file per rank),
                                files ({name: {"bytes", "sha256"}} of every file listed)
    DIR/epoch{e}-dense.pt       rank 0: what every rank holds alike (DistTrainer.replicated_state),
                                and the caller's ``extra`` (the launcher's per-epoch report records)
    DIR/epoch{e}-rank{r}.pt     rank r: what rank r alone holds (DistTrainer.rank_state)

and the generation before it. Saving starts with a barrier, so no rank
writes before every rank finished the epoch. Each rank writes its file
(synced, renamed) and hashes it on the way; the ranks gather sizes and
digests, so a rank that failed to write (disk full, permission) makes every
rank raise, naming its file. Rank 0 then commits the manifest and removes
generations older than the previous one. A save interrupted at any point
leaves the previous generation whole.

``load_checkpoint`` (every rank, on a freshly built trainer) checks the
newest manifest against the run: world size, method and configuration must
match, or an error names the difference. Each rank checks the size and
sha256 of the replicated file and of its own; if any rank finds a file
missing, truncated or corrupt, every rank warns and takes the previous
generation. The directory must be one every rank sees (on several
machines, a shared file system), as the partition directory.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from .. import checkpoints
from ..checkpoints import CheckpointError
from ..training.resume_state import config_differences

FORMAT = "gnnc-dist-checkpoint"
VERSION = 2
_OWN_FILE = re.compile(r"epoch\d+-(dense|rank\d+)\.pt(\.tmp)?")
_DIGEST = 32


def dense_file(epoch: int) -> str:
    return f"epoch{epoch}-dense.pt"


def rank_file(epoch: int, rank: int) -> str:
    return f"epoch{epoch}-rank{rank}.pt"


def save_checkpoint(trainer, directory, extra=None) -> Path:
    """Write ``trainer``'s checkpoint after its current epoch into ``directory``; every rank calls it.

    ``extra`` (rank 0's, JSON-like) is stored with the replicated state and
    returned by ``load_checkpoint``. Returns the manifest path. OSError on
    every rank, naming the file and cause, when any rank fails to write.
    """
    comm, epoch = trainer.comm, trainer.epoch
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if comm.rank == 0:
        checkpoints.retire(directory, epoch)
    comm.barrier()  # every rank finished the epoch
    own, failure = rank_file(epoch, comm.rank), None
    written = {}
    try:
        written[own] = checkpoints.write_file(trainer.rank_state(), directory / own)
        if comm.rank == 0:
            replicated = {"epoch": epoch, "state": trainer.replicated_state(), "extra": extra}
            written[dense_file(epoch)] = checkpoints.write_file(replicated, directory / dense_file(epoch))
    except OSError as err:
        failure = err
    entries = _gather_entries(comm, written.get(own))
    if failure is not None:
        raise failure
    failed = [rank_file(epoch, r) for r, e in enumerate(entries) if e is None]
    if failed:
        raise OSError(f"checkpoint in {directory}: {', '.join(failed)} could not be written (see that rank's error)")
    manifest = directory / checkpoints.manifest_name(epoch)
    if comm.rank == 0:
        written.update((rank_file(epoch, r), e) for r, e in enumerate(entries))
        record = {
            "format": FORMAT,
            "version": VERSION,
            "method": trainer.method,
            "world_size": comm.world,
            "epoch": epoch,
            "config": trainer.config,
            "dense": dense_file(epoch),
            "ranks": [rank_file(epoch, r) for r in range(comm.world)],
            "files": written,
        }
        checkpoints.commit(directory, epoch, record, _OWN_FILE)
    comm.barrier()  # the manifest is committed on return
    return manifest


def _gather_entries(comm, entry: dict | None) -> list[dict | None]:
    """Every rank's manifest entry of its own file (None where that rank failed to write)."""
    wire = torch.zeros(2 + _DIGEST, dtype=torch.int64)
    if entry is not None:
        wire[0], wire[1] = 1, entry["bytes"]
        wire[2:] = torch.tensor(list(bytes.fromhex(entry["sha256"])))
    return [
        {"bytes": int(w[1]), "sha256": bytes(w[2:].tolist()).hex()} if w[0] else None for w in comm.all_gather(wire)
    ]


def read_manifest(directory) -> dict:
    """The newest manifest in ``directory``; FileNotFoundError or ValueError naming the problem."""
    return _manifest(_generations(directory)[0][1])


def _generations(directory) -> list[tuple[int, Path]]:
    found = checkpoints.generations(directory)
    if not found:
        raise FileNotFoundError(f"resume: no distributed checkpoint in {directory} (no manifest-epoch<N>.json)")
    return found


def _manifest(path: Path) -> dict:
    manifest = checkpoints.read_manifest(path)
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError(
            f"resume: {path} is not a gnnc distributed checkpoint of version {VERSION} "
            f"(format {manifest.get('format')!r}, version {manifest.get('version')!r})"
        )
    return manifest


def check_manifest(manifest: dict, directory, world: int, method: str, config: dict) -> None:
    """ValueError listing every difference between the checkpoint and this run (world size, method,
    configuration)."""
    diff = []
    if manifest["world_size"] != world:
        diff.append(f"world size: checkpoint {manifest['world_size']}, this run {world}")
    if manifest["method"] != method:
        diff.append(f"method: checkpoint {manifest['method']!r}, this run {method!r}")
    diff += config_differences(manifest["config"], config)
    if diff:
        raise ValueError(
            f"resume: the checkpoint in {directory} (after epoch {manifest['epoch']}) was written by "
            "a different run:\n  " + "\n  ".join(diff)
        )


def read_rank_files(manifest: dict, directory, rank: int) -> tuple[dict, dict]:
    """(replicated, rank ``rank``'s) states of the generation ``manifest`` lists, size and sha256 checked;
    CheckpointError naming the file and the cause."""
    directory, files = Path(directory), manifest["files"]
    out = []
    for name in (manifest["dense"], manifest["ranks"][rank]):
        state = checkpoints.read_file(directory / name, files.get(name))
        if state.get("epoch") != manifest["epoch"]:
            raise CheckpointError(
                f"{directory / name}: holds epoch {state.get('epoch')}, the manifest epoch {manifest['epoch']}"
            )
        out.append(state)
    return out[0], out[1]


def load_checkpoint(trainer, directory):
    """Restore ``trainer`` (freshly built, before ``build_cache``) from ``directory``; every rank calls it.

    Returns the ``extra`` given to ``save_checkpoint``.
    """
    comm, directory = trainer.comm, Path(directory)
    found = _generations(directory)
    problems = []
    for i, (_, path) in enumerate(found):
        previous = found[i + 1][1] if i + 1 < len(found) else None
        try:
            manifest = _manifest(path)
            check_manifest(manifest, directory, comm.world, trainer.method, trainer.config)
            dense, own = read_rank_files(manifest, directory, comm.rank)
            problem = None
        except CheckpointError as err:
            problem = err
        bad = torch.zeros(comm.world, dtype=torch.int64)
        bad[comm.rank] = problem is not None
        comm.all_reduce(bad, "max")
        if not bad.any():
            trainer.load_state(dense["state"], own)
            return dense["extra"]
        if problem is None:
            ranks = ", ".join(str(r) for r in bad.nonzero().flatten().tolist())
            problem = CheckpointError(f"{path}: rank(s) {ranks} found a broken file")
        problems.append(str(problem))
        checkpoints.fall_back(problem, previous)
    raise CheckpointError(f"resume: no whole checkpoint in {directory}:\n  " + "\n  ".join(problems))
