"""Distributed training on localhost (gloo): RAF and vanilla equal single process; faults end runs; torchrun.

Multi-process groups run once per module (``groups`` fixture): every worker
trains a few steps of each case and saves what it saw; the tests compare
that with ``MinibatchTrainer`` (single process, float64) on the same keyed
blocks. Every process has a deadline.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from gnnc.checkpoints import manifest_name
from gnnc.distributed import add_reverse_relations, meta_partition, metis_partition, save_partitions
from gnnc.distributed.collectives import Comm
from gnnc.distributed.devices import backend_for
from gnnc.distributed.grad_sync import GradSync
from gnnc.distributed.launch import torchrun_command, worker_args
from gnnc.distributed.peer_failure import peer_machines
from gnnc.distributed.raf import KeyedSampler, PartitionSampler, RAFPlan, initial_modules, raf_forward, schema_graph
from gnnc.distributed.vanilla import OwnerSampler, balanced_shares
from gnnc.message_passing import compiling
from gnnc.training.minibatch import STAGES, MinibatchTrainer

from .distributed_fixtures import free_port, spawn_group

FANOUTS, BATCH, LR, SEED, HIDDEN, CLASSES = [3, 3], 40, 0.01, 0, 8, 349
MODELS = ("rgcn", "rgat", "hgt")
DEADLINE_S = 120
TOL = dict(rtol=1e-6, atol=1e-10)


@pytest.fixture(scope="module")
def partition_dirs(dataset, tmp_path_factory):
    g = add_reverse_relations(dataset.graph)
    root = tmp_path_factory.mktemp("parts")
    dirs = {f"meta{n}": root / f"meta{n}" for n in (2, 3)}
    for n in (2, 3):
        save_partitions(meta_partition(g, "paper", n, len(FANOUTS)), dirs[f"meta{n}"])
    dirs["metis2"] = root / "metis2"
    save_partitions(metis_partition(g, 2, 0), dirs["metis2"])
    return dirs


# ----------------------------------------------------------- worker side
def _snapshot(trainer) -> dict:
    """Parameters, dense gradients and (stored rows of) table gradients of a trainer."""
    named = dict(trainer.model.named_parameters())
    named.update({f"projections.{k}": v for k, v in trainer.inputs.projections.named_parameters()})
    out = {
        "params": {k: v.detach().clone() for k, v in named.items()},
        "grads": {k: None if v.grad is None else v.grad.clone() for k, v in named.items()},
        "tables": {},
        "table_grads": {},
    }
    for t, table in trainer.inputs.tables.items():
        ids = torch.nonzero(trainer.inputs.local_row[t] >= 0).squeeze(1)
        rows = trainer.inputs.local_row[t][ids]
        out["tables"][t] = (ids, table.weight.detach()[rows].clone())
        grad = table.weight.grad
        out["table_grads"][t] = None if grad is None else grad.to_dense()[rows].clone()
    return out


def _case_worker(rank, world, port, out_dir, cases):
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from gnnc.distributed import load_partitions
    from gnnc.distributed.process_group import init_from_env, leave
    from gnnc.distributed.raf import RAFTrainer
    from gnnc.distributed.vanilla import VanillaTrainer

    comm = init_from_env(timeout_s=60)
    for case in cases:
        parts = load_partitions(case["parts"])
        options = dict(num_classes=CLASSES, hidden=HIDDEN, dtype=torch.float64, compiled=case["compiled"])
        if case["mode"] == "raf":
            trainer = RAFTrainer(comm, parts, case["model"], FANOUTS, BATCH, LR, SEED, **options)
            batches = [trainer.split_ids["train"][k * BATCH : (k + 1) * BATCH] for k in range(2)]
        else:
            trainer = VanillaTrainer(comm, parts, case["model"], FANOUTS, BATCH, LR, SEED, target="paper", **options)
            own = trainer.split_ids["train"]
            batches = [own[: 15 + 10 * rank], own[30 : 30 + 20 - 5 * rank]]  # uneven on purpose
        steps = []
        for seeds in batches:
            first = len(comm.meter.steps)
            loss, _, _ = trainer.train_step(seeds)
            steps.append(dict(loss=loss, seeds=seeds, bytes=comm.meter.steps[first].sent, **_snapshot(trainer)))
        unused = trainer.unused_rows() if case["mode"] == "raf" else {}
        torch.save({"steps": steps, "unused": unused}, f"{out_dir}/{case['name']}-{rank}.pt")
    leave(comm)


def _run_group(world, cases, out_dir):
    spawn_group(_case_worker, world, (world, free_port(), str(out_dir), cases), DEADLINE_S, f"{world}-process group")


@pytest.fixture(scope="module")
def groups(partition_dirs, tmp_path_factory):
    """Results of every (case, rank): 2-rank RAF and vanilla, 3-rank RAF."""
    out = tmp_path_factory.mktemp("results")

    def case(name, mode, model, parts, compiled=False):
        return dict(name=name, mode=mode, model=model, parts=str(partition_dirs[parts]), compiled=compiled)

    two = [case(f"raf2-{m}", "raf", m, "meta2") for m in MODELS]
    two += [case(f"vanilla2-{m}", "vanilla", m, "metis2") for m in MODELS]
    two.append(case("raf2-rgat-compiled", "raf", "rgat", "meta2", compiled=True))
    three = [case(f"raf3-{m}", "raf", m, "meta3") for m in MODELS]
    _run_group(2, two, out)
    _run_group(3, three, out)

    def load(name, world):
        return [torch.load(out / f"{name}-{r}.pt", weights_only=False) for r in range(world)]

    return load


# ---------------------------------------------------------- reference side
def reference(dataset, model: str, seed_batches) -> list:
    """Single-process MinibatchTrainer steps on keyed blocks: loss, grads and parameters after each step."""
    trainer = MinibatchTrainer(dataset, model, FANOUTS, BATCH, LR, SEED, hidden=HIDDEN, dtype=torch.float64)
    sampler = KeyedSampler(trainer.g, FANOUTS, "paper", seed=SEED)
    named = dict(trainer.model.named_parameters())
    named.update({f"projections.{k}": v for k, v in trainer.embedding.projections.named_parameters()})
    steps = []
    for k, seeds in enumerate(seed_batches):
        sampler.step = k
        blocks = sampler.sample(seeds)
        logits = trainer.model(blocks, trainer.embedding(blocks[0].src_ids))
        loss = F.cross_entropy(logits, trainer.labels[seeds])
        trainer.dense_opt.zero_grad()
        trainer.sparse_opt.zero_grad()
        loss.backward()
        tables = {t: e.weight for t, e in trainer.embedding.embeddings.items()}
        table_grads = {t: None if w.grad is None else w.grad.to_dense().clone() for t, w in tables.items()}
        grads = {k: None if v.grad is None else v.grad.clone() for k, v in named.items()}
        trainer.dense_opt.step()
        trainer.sparse_opt.step()
        steps.append(
            dict(
                loss=loss.item(),
                grads=grads,
                table_grads=table_grads,
                params={k: v.detach().clone() for k, v in named.items()},
                tables={t: w.detach().clone() for t, w in tables.items()},
            )
        )
    return steps


def assert_matches(ranks, ref_steps):
    """Every rank's losses, gradients and updated parameters equal the reference (rows it computes)."""
    for rank, result in enumerate(ranks):
        for k, (got, want) in enumerate(zip(result["steps"], ref_steps)):
            where = f"rank {rank} step {k}"
            assert got["loss"] == pytest.approx(want["loss"], rel=1e-9), where
            for name, value in want["params"].items():
                keep = torch.ones(value.shape[0], dtype=torch.bool)
                if name in result["unused"]:
                    keep[result["unused"][name]] = False
                torch.testing.assert_close(got["params"][name][keep], value[keep], **TOL, msg=f"{where} {name}")
                if want["grads"][name] is None:
                    assert got["grads"][name] is None, f"{where} {name}"
                else:
                    torch.testing.assert_close(
                        got["grads"][name][keep], want["grads"][name][keep], **TOL, msg=f"{where} grad {name}"
                    )
            for t, (ids, rows) in got["tables"].items():
                torch.testing.assert_close(rows, want["tables"][t][ids], **TOL, msg=f"{where} table {t}")
                want_grad = want["table_grads"][t]
                want_grad = torch.zeros_like(rows) if want_grad is None else want_grad[ids]
                got_grad = torch.zeros_like(rows) if got["table_grads"][t] is None else got["table_grads"][t]
                torch.testing.assert_close(got_grad, want_grad, **TOL, msg=f"{where} table grad {t}")


# ================================================================== tests
@pytest.mark.parametrize("world,model", [(w, m) for w in (2, 3) for m in MODELS])
def test_raf_equals_single_process(groups, dataset, world, model):
    ranks = groups(f"raf{world}-{model}", world)
    assert_matches(ranks, reference(dataset, model, [s["seeds"] for s in ranks[0]["steps"]]))
    # Learnable rows held by several partitions are stored once.
    stored = [set(r["steps"][0]["tables"]) for r in ranks]
    assert sum(len(s) for s in stored) == len(set().union(*stored))


def test_raf_with_compiled_message_passing(groups, dataset):
    ranks = groups("raf2-rgat-compiled", 2)
    assert_matches(ranks, reference(dataset, "rgat", [s["seeds"] for s in ranks[0]["steps"]]))


@pytest.mark.parametrize("model", MODELS)
def test_vanilla_equals_single_process_on_the_union_batch(groups, dataset, model):
    ranks = groups(f"vanilla2-{model}", 2)
    union = [torch.cat([r["steps"][k]["seeds"] for r in ranks]) for k in range(2)]
    assert_matches(ranks, reference(dataset, model, union))


def test_raf_exchanges_only_the_seeds_partial_aggregations(groups):
    """Per step and direction: one row per seed and layer (all-reduced below the last layer, reduced to
    rank 0 and broadcast back at the last), plus rank 0's loss; no sampling traffic."""
    for world in (2, 3):
        ranks = groups(f"raf{world}-rgcn", world)
        for k in range(2):
            seeds = len(ranks[0]["steps"][k]["seeds"])
            wire = {stage: sum(r["steps"][k]["bytes"].get(stage, 0) for r in ranks) for stage in STAGES}
            rows = 2 * seeds * HIDDEN * 8 + seeds * CLASSES * 8  # float64; a ring all-reduce moves 2(p-1)/p
            assert wire["forward"] == pytest.approx((world - 1) * (rows + 16))
            assert wire["backward"] == pytest.approx((world - 1) * rows)
            assert wire["sample"] == 0


def test_vanilla_moves_sampled_structure_and_remote_rows(groups):
    for result in groups("vanilla2-rgcn", 2):
        for step in result["steps"]:
            assert step["bytes"]["sample"] > 0 and step["bytes"]["feature fetch"] > 0


# ---------------------------------------------------------- one process
def test_keyed_draws_depend_only_on_each_destinations_edges(dataset):
    g = add_reverse_relations(dataset.graph)
    seeds = torch.arange(30)
    full = KeyedSampler(g, [4, 4], "paper", seed=3)
    full.step = 7
    # A graph with only two relations draws the same edges of those relations.
    keep = [("paper", "cites", "paper"), ("author", "writes", "paper")]
    meta = g.metagraph()
    part = meta_partition(g, "paper", 3, 2).parts[0]
    assert set(keep) <= set(part.relations)
    sub, eids = schema_graph(meta, part)
    partial = KeyedSampler(sub, [4, 4], "paper", seed=3, parent_eids=eids)
    partial.step = 7
    a, b = full.sample(seeds)[-1], partial.sample(seeds)[-1]
    for rel in keep:  # the parent's edge ids within the relation (blocks hold their graph's global ids)
        pa = a.parent_eids[a.edge_type_ids() == a.etype_id(rel)] - g.index.rel_offsets[g.etype_id(rel)]
        pb = b.parent_eids[b.edge_type_ids() == b.etype_id(rel)] - sub.index.rel_offsets[sub.etype_id(rel)]
        assert torch.equal(pa, eids[rel][pb]), rel
        # min(fanout, in-degree) edges per seed and relation
        want = g.in_degrees(etype=rel)[seeds].clamp(max=4)
        assert torch.equal(a.in_degrees(etype=rel)[:30], want)
    full.step = 8
    assert not torch.equal(full.sample(seeds)[-1].parent_eids, a.parent_eids)


def test_every_seed_edge_is_drawn_by_exactly_one_rank(dataset):
    """Four parts, the heaviest sub-metatree replicated: replicas split the seeds, roots split the relations."""
    g = add_reverse_relations(dataset.graph)
    parts = meta_partition(g, "paper", 4, 2)
    plan = RAFPlan.of(parts)
    assert sorted(plan.shares) == [(0, 1), (0, 1), (0, 2), (1, 2)]
    seeds = torch.arange(40)
    full = KeyedSampler(g, FANOUTS, "paper", seed=2)
    full.step = 1
    samplers = []
    for r, part in enumerate(parts.parts):
        local, eids = schema_graph(parts.schema, part)
        samplers.append(
            PartitionSampler(local, FANOUTS, "paper", plan.roots[r], *plan.shares[r], seed=2, parent_eids=eids)
        )
        samplers[-1].step = 1

    def seed_edges(block):  # (relation, source, seed) of the edges into seeds, parent ids
        src, dst = block.find_edges()
        first_seed = block.index.ntype_offsets[block.ntype_id("paper")]  # the seeds lead the paper nodes
        into_seed = (dst >= first_seed) & (dst < first_seed + len(seeds))
        ends = [block.edge_type_ids(), block.src_ids[src], block.src_ids[dst]]
        return sorted(zip(*(e[into_seed].tolist() for e in ends)))

    want = full.sample(seeds)
    got = [s.sample(seeds) for s in samplers]
    for layer in range(len(FANOUTS)):
        assert sorted(e for blocks in got for e in seed_edges(blocks[layer])) == seed_edges(want[layer])


def test_owner_sampler_on_one_rank_builds_the_keyed_blocks(dataset):
    g = add_reverse_relations(dataset.graph)
    sampler = OwnerSampler(Comm.local(), metis_partition(g, 1, 0), [4, 4], "paper", seed=3)
    full = KeyedSampler(g, [4, 4], "paper", seed=3)
    sampler.step = full.step = 5
    seeds = torch.arange(10, 50)
    for got, want in zip(sampler.sample(seeds), full.sample(seeds)):
        assert torch.equal(got.src_ids, want.src_ids) and got.num_dst_per_type == want.num_dst_per_type
        assert torch.equal(torch.sort(got.parent_eids).values, torch.sort(want.parent_eids).values)


@pytest.mark.parametrize("model", MODELS)
def test_relation_split_layers_equal_the_models(dataset, model):
    """raf_forward on one rank is the model's forward, eager and compiled, values and gradients."""
    trainer = MinibatchTrainer(dataset, model, FANOUTS, BATCH, LR, SEED, hidden=HIDDEN, dtype=torch.float64)
    sampler = KeyedSampler(trainer.g, FANOUTS, "paper", seed=1)
    seeds = torch.arange(25)
    blocks = sampler.sample(seeds)
    params = list(trainer.model.parameters())
    x = trainer.embedding(blocks[0].src_ids)
    want = trainer.model(blocks, x)
    want_grads = torch.autograd.grad(want.square().sum(), params, allow_unused=True)
    for context in (torch.enable_grad, lambda: compiling({})):
        with context():
            got = raf_forward(trainer.model, blocks, x, trainer.g.ntype_id("paper"), 25, Comm.local())
        torch.testing.assert_close(got, want, **TOL)
        got_grads = torch.autograd.grad(got.square().sum(), params, allow_unused=True)
        for g1, g2 in zip(got_grads, want_grads):
            if g2 is not None:
                torch.testing.assert_close(g1, g2, **TOL)


def test_initial_modules_are_the_minibatch_trainers(dataset):
    trainer = MinibatchTrainer(dataset, "hgt", FANOUTS, BATCH, LR, 5, hidden=HIDDEN)
    g = trainer.g
    learnable = [t for t in g.ntypes if t != "paper"]
    embedding, model = initial_modules(
        schema_graph(g.metagraph()),
        "hgt",
        HIDDEN,
        CLASSES,
        2,
        {t: 8 for t in g.ntypes},
        learnable,
        None,
        5,
        torch.float32,
    )
    for a, b in zip(
        list(model.parameters()) + list(embedding.parameters()),
        list(trainer.model.parameters()) + list(trainer.embedding.parameters()),
    ):
        assert torch.equal(a, b)


def test_plan_places_rows_and_relations(dataset):
    g = add_reverse_relations(dataset.graph)
    plan = RAFPlan.of(meta_partition(g, "paper", 2, 2))
    # Authors and fields sit two hops deep only under `cites` (part 0), which stores their rows.
    assert plan.holders("author") == [0, 1] and plan.row_owner("author") == 0
    assert plan.row_owner("institution") == 1
    assert plan.shared_relation_ids(1).numel() == 0, "root relations are split, last-layer weights stay local"
    shared_below = {plan.relations[i] for i in plan.shared_relation_ids(0).tolist()}
    assert shared_below == {("author", "writes", "paper"), ("field_of_study", "rev_has_topic", "paper")}
    replicated = RAFPlan.of(meta_partition(g, "paper", 4, 2))
    assert ("paper", "cites", "paper") in {replicated.relations[i] for i in replicated.shared_relation_ids(1)}
    with pytest.raises(ValueError, match="meta partitions"):
        RAFPlan.of(metis_partition(g, 2, 0))


def test_balanced_shares_keep_own_ids_first():
    owned = [torch.arange(0, 7), torch.arange(7, 8), torch.arange(8, 11)]
    shares = balanced_shares(owned, 3)
    assert [s.numel() for s in shares] == [4, 4, 3]
    assert torch.equal(torch.sort(torch.cat(shares)).values, torch.arange(11))
    assert torch.equal(shares[0], torch.arange(4)) and shares[1][0] == 7 and torch.equal(shares[2], owned[2])


def test_backend_follows_the_device():
    assert backend_for("cpu") == "gloo" and backend_for(torch.device("cpu")) == "gloo"
    assert backend_for("cuda") == "nccl" and backend_for(torch.device("cuda", 1)) == "nccl"


def test_peer_machines_names_the_addresses_in_a_gloo_error():
    error = "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [198.18.0.2]:40123 (local [127.0.0.1]:5000)"
    found = peer_machines(error)
    assert found.startswith("; peer ") and found.endswith("(198.18.0.2)") and "127.0.0.1" not in found
    assert peer_machines("Timed out waiting 5000ms for recv operation to complete") == ""


def _rounds_worker(rank, world, port, out_dir):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from gnnc.distributed.process_group import init_from_env, leave

    comm = init_from_env(timeout_s=30)
    calls = {
        "all_reduce": lambda: comm.all_reduce(torch.ones(4)),
        "all_gather": lambda: comm.all_gather(torch.ones(4)),
        "broadcast": lambda: comm.broadcast(torch.ones(4)),
        "reduce": lambda: comm.reduce(torch.ones(4)),
        "exchange": lambda: comm.exchange([torch.ones(2, 3)] * world),
        "exchange, counts known": lambda: comm.exchange([torch.ones(2, 3)] * world, [2] * world),
    }
    for stage, call in calls.items():
        with comm.meter.stage(stage):
            call()
    torch.save(comm.meter.end_step().rounds, f"{out_dir}/rounds-{rank}.pt")
    leave(comm)


def test_each_collective_counts_its_rounds(tmp_path):
    """Rounds (latencies waited for in sequence) over 3 ranks: ring all-reduce 2 (p - 1), ring all-gather
    p - 1, tree reduce / broadcast ceil(log2 p), all-to-all 1 (2 when the row counts go first)."""
    spawn_group(_rounds_worker, 3, (3, free_port(), str(tmp_path)), DEADLINE_S, "3-process group")
    expected = {
        "all_reduce": 4,
        "all_gather": 2,
        "broadcast": 2,
        "reduce": 2,
        "exchange": 2,
        "exchange, counts known": 1,
    }
    for rank in range(3):
        assert torch.load(tmp_path / f"rounds-{rank}.pt") == expected


def test_grad_sync_and_collectives_are_the_identity_on_one_rank():
    comm = Comm.local()
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    GradSync(comm, [p])()
    assert torch.equal(p.grad, torch.full((3,), 2.0))
    x = torch.arange(4.0, requires_grad=True)
    assert comm.sum_over_ranks(x) is x and comm.exchange([x])[0] is x
    assert comm.meter.current.sent == {}


# ------------------------------------------------------- faults, torchrun
DYING_WORKER = """
import os, sys
from gnnc.distributed import collectives, launch
if os.environ["RANK"] == "1":
    calls, original = [0], collectives.Comm.sum_over_ranks
    def sum_then_die(self, x):
        calls[0] += 1
        if calls[0] == 2:  # mid-step: after layer 0, during layer 1 of the first step
            {fault}
        return original(self, x)
    collectives.Comm.sum_over_ranks = sum_then_die
launch.worker_main(sys.argv[1:])
"""


@pytest.mark.parametrize("fault,timeout,world", [("os._exit(17)", 20, 3), ("import time; time.sleep(600)", 5, 2)])
def test_a_dead_or_stuck_worker_ends_the_others_with_a_clear_error(partition_dirs, fault, timeout, world):
    port = free_port()
    args = worker_args(
        partition_dirs[f"meta{world}"],
        "raf",
        "rgcn",
        FANOUTS,
        BATCH,
        1,
        LR,
        HIDDEN,
        SEED,
        ["non-target"],
        CLASSES,
        "paper",
        timeout,
        evaluate=False,
    )
    code = DYING_WORKER.format(fault=fault)
    procs = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        for rank in [r for r in range(world) if r != 1]:
            _, err = procs[rank].communicate(timeout=60 + timeout)
            assert procs[rank].returncode == 1, err
            assert f"gnnc worker rank {rank} on {socket.gethostname()}: PeerFailure: rank {rank} of {world} on " in err
            assert "a peer process died or did not answer" in err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    if fault.startswith("os._exit"):
        assert procs[1].returncode == 17


def test_torchrun_launch_trains_and_reports(partition_dirs, tmp_path):
    report = tmp_path / "report.json"
    args = worker_args(
        partition_dirs["meta2"],
        "raf",
        "rgcn",
        FANOUTS,
        128,
        1,
        LR,
        HIDDEN,
        SEED,
        ["non-target"],
        CLASSES,
        "paper",
        60,
        report=report,
        compiled=True,
        checkpoint=tmp_path / "checkpoint",
        cache_fraction=0.2,
    )
    cmd = torchrun_command(2, args)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--nproc-per-node=2"] and "--standalone" in cmd
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=DEADLINE_S, env=dict(os.environ, OMP_NUM_THREADS="1")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epoch 1/1" in done.stdout and "MiB/step" in done.stdout and "all ranks: cache hit" in done.stdout
    epoch = json.loads(report.read_text())["epochs"][0]
    assert epoch["steps"] == 4 and len(epoch["ranks"]) == 2  # 442 training papers, batches of 128
    assert len(epoch["losses"]) == 4 and 0.0 <= epoch["val_acc"] <= 1.0
    for rank in epoch["ranks"]:
        assert rank["sent_per_step"]["forward"] > 0 and rank["sent_per_step"]["sample"] == 0
        assert sum(c["hits"] for c in rank["cache"].values()) > 0
    manifest = json.loads((tmp_path / "checkpoint" / manifest_name(1)).read_text())  # epoch 1's generation
    assert (manifest["method"], manifest["world_size"], manifest["epoch"]) == ("raf", 2, 1)
    several = torchrun_command(2, ["--x"], nnodes=2, node_rank=1, rdzv_endpoint="host:29400")
    assert "--rdzv-endpoint=host:29400" in several and "--node-rank=1" in several
