"""Checkpoint generations (gnnc.checkpoints): sha256 per file, the previous generation as a fallback,
errors that name the file and the cause, the directory checked before a run spends an epoch."""

import os
import re

import pytest
import torch

from gnnc import checkpoints
from gnnc.checkpoints import CheckpointError, CheckpointWarning
from gnnc.training import minibatch

OWNED = re.compile(r"gen\d+\.pt(\.tmp)?")


def save(directory, epoch, value):
    checkpoints.retire(directory, epoch)
    name = f"gen{epoch}.pt"
    entry = checkpoints.write_file({"epoch": epoch, "w": torch.full((256,), float(value))}, directory / name)
    return checkpoints.commit(directory, epoch, {"epoch": epoch, "files": {name: entry}}, OWNED)


def load(directory):
    def read(record):
        ((name, entry),) = record["files"].items()
        return checkpoints.read_file(directory / name, entry)

    return checkpoints.newest_whole(directory, read)


def flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def tensor_offset(path, value):
    """Where the first float32 ``value`` lies in ``path``: inside the tensor's data, not the zip structure."""
    return path.read_bytes().index(torch.tensor([value], dtype=torch.float32).numpy().tobytes())


def test_two_generations_are_kept_and_older_ones_removed(tmp_path):
    for epoch in (1, 2, 3):
        save(tmp_path, epoch, epoch)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gen2.pt",
        "gen3.pt",
        "manifest-epoch2.json",
        "manifest-epoch3.json",
    ]
    assert load(tmp_path)["epoch"] == 3


def test_a_flipped_float_is_caught_and_the_previous_generation_used(tmp_path):
    save(tmp_path, 1, 1.0)
    save(tmp_path, 2, 2.0)
    flip(tmp_path / "gen2.pt", tensor_offset(tmp_path / "gen2.pt", 2.0))
    with pytest.warns(CheckpointWarning, match=r"gen2\.pt: corrupt \(sha256 .*manifest-epoch1\.json"):
        state = load(tmp_path)
    assert state["epoch"] == 1 and torch.equal(state["w"], torch.ones(256))


@pytest.mark.parametrize(
    "cut, cause", [(100, r"truncated \(100 of \d+ bytes\)"), (0, r"truncated \(0 of"), (None, "missing")]
)
def test_a_truncated_empty_or_missing_file_is_named_with_its_cause(tmp_path, cut, cause):
    save(tmp_path, 1, 1.0)
    path = tmp_path / "gen1.pt"
    if cut is None:
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(CheckpointError, match=rf"no whole checkpoint in .*\n  .*gen1\.pt: {cause}"):
        load(tmp_path)


def test_a_broken_manifest_is_named_and_the_previous_generation_used(tmp_path):
    save(tmp_path, 1, 1.0)
    save(tmp_path, 2, 2.0)
    (tmp_path / "manifest-epoch2.json").write_text('{"epoch": 2, "fi')
    with pytest.warns(CheckpointWarning, match=r"manifest-epoch2\.json: not a complete manifest \(truncated"):
        assert load(tmp_path)["epoch"] == 1
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        load(tmp_path / "nothing")


def test_a_full_disk_names_the_file_and_keeps_the_previous_generation(tmp_path):
    save(tmp_path, 1, 1.0)
    os.symlink("/dev/full", tmp_path / "gen2.pt.tmp")  # writes there fail with ENOSPC, as on a full disk
    with pytest.raises(OSError, match=r"cannot write checkpoint .*gen2\.pt: disk full") as caught:
        save(tmp_path, 2, 2.0)
    assert caught.value.errno == 28
    assert not (tmp_path / "gen2.pt.tmp").exists() and load(tmp_path)["epoch"] == 1


def test_a_new_run_in_the_directory_retires_the_old_runs_later_generations(tmp_path):
    for epoch in (1, 2, 3):
        save(tmp_path, epoch, epoch)
    save(tmp_path, 1, 10.0)
    assert [e for e, _ in checkpoints.generations(tmp_path)] == [1]
    assert load(tmp_path)["w"][0] == 10.0


def test_an_unwritable_directory_fails_before_the_first_epoch(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(minibatch, "MinibatchTrainer", no_training)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=r"cannot write into checkpoint .*file/ckpt: a path component is not a dir"):
        minibatch.train_minibatch(None, "rgcn", [2], 8, 1, 0.1, 0, checkpoint_dir=tmp_path / "file" / "ckpt")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_fails_before_the_first_epoch(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(OSError, match=r"cannot write into checkpoint .*locked: permission denied"):
        minibatch.train_minibatch(None, "rgcn", [2], 8, 1, 0.1, 0, checkpoint_dir=locked)
