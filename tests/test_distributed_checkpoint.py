"""Distributed checkpoint / resume and the feature cache in the RAF and vanilla trainers.

One 2-process gloo group on localhost (``runs`` fixture) drives the
launcher's worker loop (``launch.run_worker``, float64) for RAF and vanilla:
two uninterrupted epochs; one epoch with a checkpoint; a resume of that
checkpoint to two epochs, with the feature cache; one epoch with the cache.
Every worker saves its epoch records and final state; the tests compare them.
The group has a deadline.
"""

import json
import os
import shutil

import pytest
import torch

from gnnc.checkpoints import CheckpointError, CheckpointWarning
from gnnc.distributed import add_reverse_relations, meta_partition, metis_partition, save_partitions
from gnnc.distributed.checkpoint import check_manifest, load_checkpoint, read_manifest, read_rank_files
from gnnc.distributed.collectives import Comm
from gnnc.distributed.launch import run_worker, worker_args, worker_parser
from gnnc.distributed.vanilla import VanillaTrainer

from .distributed_fixtures import free_port, spawn_group

FANOUTS, BATCH, LR, SEED, HIDDEN, CLASSES = [3, 3], 128, 0.02, 0, 8, 349
MODELS = {"raf": "rgcn", "vanilla": "rgat"}
PARTS = {"raf": "meta2", "vanilla": "metis2"}
STEPS = {"raf": 4, "vanilla": 2}  # 442 training papers in batches of 128: shared (RAF) or per rank (vanilla)
CACHE_FRACTION = 0.25
DEADLINE_S = 90


@pytest.fixture(scope="module")
def partition_dirs(dataset, tmp_path_factory):
    g = add_reverse_relations(dataset.graph)
    root = tmp_path_factory.mktemp("parts")
    splits = {
        "meta2": meta_partition(g, "paper", 2, len(FANOUTS)),
        "metis2": metis_partition(g, 2, 0),
        "metis1": metis_partition(g, 1, 0),
    }
    for name, split in splits.items():
        save_partitions(split, root / name)
    return {name: root / name for name in splits}


def argv(partition_dirs, mode, epochs, **options):
    return worker_args(
        partition_dirs[PARTS[mode]],
        mode,
        MODELS[mode],
        FANOUTS,
        BATCH,
        epochs,
        LR,
        HIDDEN,
        SEED,
        ["non-target"],
        CLASSES,
        "paper",
        60,
        dtype="float64",
        **options,
    )


# ----------------------------------------------------------- worker side
def _state(trainer) -> dict:
    """Every parameter, learnable store row and store optimizer state a rank holds."""
    out = {f"model.{k}": v.detach().clone() for k, v in trainer.model.named_parameters()}
    out.update({f"projections.{k}": v.detach().clone() for k, v in trainer.inputs.projections.named_parameters()})
    for t, table in trainer.inputs.tables.items():
        out[f"table.{t}"] = table.weight.detach().clone()
        for k, v in trainer.sparse_opt.state.get(table.weight, {}).items():
            out[f"sparse.{t}.{k}"] = v.clone()
    for i, (p, adam) in enumerate(trainer.dense_opt.state.items()):
        for k, v in adam.items():
            out[f"adam.{i}.{k}"] = v.clone()
    return out


def _worker(rank, world, port, out_dir, runs):
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from gnnc.distributed import load_partitions
    from gnnc.distributed.launch import run_worker, worker_parser
    from gnnc.distributed.process_group import init_from_env, leave

    comm = init_from_env(timeout_s=60)
    for name, worker_argv in runs:
        args = worker_parser().parse_args(worker_argv)
        trainer, records = run_worker(comm, load_partitions(args.partitions), args)
        torch.save({"records": records, "state": _state(trainer)}, f"{out_dir}/{name}-{rank}.pt")
    leave(comm)


@pytest.fixture(scope="module")
def runs(partition_dirs, tmp_path_factory):
    """``load(name)``: [rank 0's, rank 1's] {records, state} of run ``name``; ``checkpoints[mode]``: its directory."""
    out = tmp_path_factory.mktemp("results")
    checkpoints = {mode: out / f"checkpoint-{mode}" for mode in MODELS}
    plan = []
    for mode in MODELS:
        plan += [
            (f"{mode}-straight", argv(partition_dirs, mode, 2)),
            (f"{mode}-first", argv(partition_dirs, mode, 1, checkpoint=checkpoints[mode])),
            (
                f"{mode}-resumed",
                argv(partition_dirs, mode, 2, checkpoint=checkpoints[mode], resume=True, cache_fraction=CACHE_FRACTION),
            ),
            (f"{mode}-cached", argv(partition_dirs, mode, 1, cache_fraction=CACHE_FRACTION)),
        ]
    spawn_group(_worker, 2, (2, free_port(), str(out), plan), DEADLINE_S, "the 2-process group")

    def load(name):
        return [torch.load(out / f"{name}-{r}.pt", weights_only=False) for r in range(2)]

    load.checkpoints = checkpoints
    return load


def losses(records) -> torch.Tensor:
    return torch.tensor([step for record in records for step in record["losses"]], dtype=torch.float64)


# ================================================================== tests
@pytest.mark.parametrize("mode", list(MODELS))
def test_resumed_run_repeats_the_uninterrupted_run(runs, mode):
    straight, first, resumed = runs(f"{mode}-straight"), runs(f"{mode}-first"), runs(f"{mode}-resumed")
    for rank in range(2):
        want = straight[rank]["records"]
        assert len(want) == 2 and all(len(r["losses"]) == STEPS[mode] for r in want)
        assert torch.equal(losses(first[rank]["records"]), losses(want[:1]))
        got = resumed[rank]["records"]
        assert [r["epoch"] for r in got] == [1, 2]
        assert torch.equal(losses(got), losses(want)), f"rank {rank}"
        for a, b in zip(got, want):
            assert (a["loss"], a["train_acc"], a["val_acc"], a["test_acc"]) == (
                b["loss"],
                b["train_acc"],
                b["val_acc"],
                b["test_acc"],
            )
        state, want_state = resumed[rank]["state"], straight[rank]["state"]
        assert state.keys() == want_state.keys()
        for name, value in want_state.items():
            assert torch.equal(state[name], value), f"rank {rank} {name}"
    assert want[1]["loss"] < want[0]["loss"]  # it learns


def test_checkpoint_directory_holds_one_file_per_rank_and_a_manifest(runs):
    for mode, directory in runs.checkpoints.items():
        manifest = read_manifest(directory)
        assert (manifest["method"], manifest["world_size"], manifest["epoch"]) == (mode, 2, 2)
        assert manifest["ranks"] == ["epoch2-rank0.pt", "epoch2-rank1.pt"] and manifest["dense"] == "epoch2-dense.pt"
        assert manifest["config"]["model"] == MODELS[mode] and manifest["config"]["dtype"] == "torch.float64"
        # Epoch 2 and the generation before it; no temporary file is left.
        previous = ["manifest-epoch1.json", "epoch1-dense.pt", "epoch1-rank0.pt", "epoch1-rank1.pt"]
        assert sorted(p.name for p in directory.iterdir()) == sorted(
            ["manifest-epoch2.json", manifest["dense"], *manifest["ranks"], *previous]
        )
        assert sorted(manifest["files"]) == sorted([manifest["dense"], *manifest["ranks"]])


@pytest.mark.parametrize("mode", list(MODELS))
def test_the_cache_changes_no_value_and_counts_hits_per_node_type(runs, mode):
    straight, cached, resumed = runs(f"{mode}-straight"), runs(f"{mode}-cached"), runs(f"{mode}-resumed")
    for rank in range(2):
        assert torch.equal(losses(cached[rank]["records"]), losses(straight[rank]["records"][:1]))
        records = [cached[rank]["records"][0], resumed[rank]["records"][1]]
        assert "cache" not in resumed[rank]["records"][0]["ranks"][rank]  # epoch 1 ran without cache
        for record in records:
            counts = record["ranks"][rank]["cache"]
            total = {k: sum(c[k] for c in counts.values()) for k in ("hits", "misses", "bytes_moved", "bytes_saved")}
            assert total["hits"] > 0 and total["misses"] > 0, (rank, counts)
            assert 0 < total["bytes_saved"] and 0 < total["bytes_moved"]
            for t, c in counts.items():
                assert c["cached_rows"] == 0 or c["cache_bytes"] > 0, t
    # Over both ranks the cache serves read-only features and learnable rows.
    types = {t for r in cached[0]["records"][0]["ranks"] for t, c in r["cache"].items() if c["hits"]}
    assert "paper" in types and types & {"author", "field_of_study", "institution"}


def test_resume_with_another_world_size_fails_naming_it(runs, partition_dirs):
    from gnnc.distributed import load_partitions

    one = VanillaTrainer(
        Comm.local(),
        load_partitions(partition_dirs["metis1"]),
        MODELS["vanilla"],
        FANOUTS,
        BATCH,
        LR,
        SEED,
        num_classes=CLASSES,
        target="paper",
        hidden=HIDDEN,
        dtype=torch.float64,
    )
    with pytest.raises(ValueError, match="world size: checkpoint 2, this run 1"):
        load_checkpoint(one, runs.checkpoints["vanilla"])


def test_a_different_method_or_a_missing_rank_file_is_named(runs, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(runs.checkpoints["vanilla"], directory)
    manifest = read_manifest(directory)
    config = manifest["config"]
    with pytest.raises(ValueError, match="method: checkpoint 'vanilla', this run 'raf'"):
        check_manifest(manifest, directory, 2, "raf", config)
    with pytest.raises(ValueError, match="batch_size: checkpoint 128, this run 64"):
        check_manifest(manifest, directory, 2, "vanilla", dict(config, batch_size=64))
    (directory / "epoch2-rank1.pt").unlink()
    with pytest.raises(CheckpointError, match=r"epoch2-rank1\.pt: missing"):
        read_rank_files(manifest, directory, 1)
    (directory / "manifest-epoch2.json").write_text(json.dumps(dict(manifest, version=99)))
    with pytest.raises(ValueError, match="version 99"):
        read_manifest(directory)
    with pytest.raises(FileNotFoundError, match="no distributed checkpoint"):
        read_manifest(tmp_path / "nothing")


def test_a_corrupt_rank_file_resumes_from_the_previous_generation(partition_dirs, tmp_path):
    from gnnc.distributed import load_partitions

    parts = load_partitions(partition_dirs["metis1"])

    def run(epochs, **options):
        args = worker_parser().parse_args(
            worker_args(
                partition_dirs["metis1"],
                "vanilla",
                MODELS["vanilla"],
                FANOUTS,
                BATCH,
                epochs,
                LR,
                HIDDEN,
                SEED,
                ["non-target"],
                CLASSES,
                "paper",
                60,
                dtype="float64",
                checkpoint=tmp_path,
                evaluate=False,
                **options,
            )
        )
        return run_worker(Comm.local(), parts, args)[1]

    straight = run(2)
    newest = tmp_path / "epoch2-rank0.pt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 1
    newest.write_bytes(bytes(data))
    with pytest.warns(CheckpointWarning, match=r"epoch2-rank0\.pt: corrupt .*manifest-epoch1\.json"):
        resumed = run(2, resume=True)
    assert torch.equal(losses(resumed), losses(straight))
