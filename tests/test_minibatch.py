"""Mini-batch trainer: breakdown, learning, exact resume; compiled blocks equal eager and reuse plans."""

import gc
import weakref

import pytest
import torch

import gnnc
from gnnc.checkpoints import CheckpointWarning
from gnnc.cli import build_parser, train
from gnnc.compiler import driver as compiled_runtime
from gnnc.compiler.driver import recording
from gnnc.data import synthetic
from gnnc.data.neighbor_sampler import NeighborSampler
from gnnc.training.minibatch import STAGES, MinibatchTrainer, train_minibatch
from gnnc.training.model_builders import MODEL_BUILDERS

from .graphs import random_heterograph

SMALL = dict(fanouts=[2, 2], batch_size=128, lr=0.02, seed=0)
OPTIONS = dict(hidden=8, dtype=torch.float64, progress=False)


@pytest.fixture(scope="module")
def mag():
    return synthetic("mag", scale=0.001, seed=0, feat_dim=8)


@pytest.fixture(scope="module")
def straight(mag):
    """Two uninterrupted epochs."""
    return train_minibatch(mag, "rgcn", epochs=2, **SMALL, **OPTIONS)


def test_training_graph_has_reverse_relations_reaching_every_type(mag):
    g = MinibatchTrainer(mag, "rgcn", [2, 2], 128, 0.01, 0, hidden=4).g
    assert len(g.canonical_etypes) == 7
    assert torch.equal(g.nodes["paper"].data["label"], mag.target_data["label"])
    blocks = NeighborSampler(g, [3, 3], "paper").sample(torch.arange(50))
    reached = {t for t, n in zip(g.ntypes, blocks[0].index.ntype_counts) if n}
    assert reached == set(g.ntypes)


def params(result):
    return [p.detach().clone() for p in [*result.model.parameters(), *result.embedding.parameters()]]


def test_resume_reproduces_uninterrupted_run(mag, straight, tmp_path):
    assert len(straight.losses) == 2 and all(len(x) == 4 for x in straight.losses)  # 442 training papers
    first = train_minibatch(mag, "rgcn", epochs=1, checkpoint_dir=tmp_path, **SMALL, **OPTIONS)
    assert first.losses == straight.losses[:1]
    resumed = train_minibatch(mag, "rgcn", epochs=2, checkpoint_dir=tmp_path, resume=True, **SMALL, **OPTIONS)
    assert torch.equal(
        torch.tensor(resumed.losses, dtype=torch.float64), torch.tensor(straight.losses, dtype=torch.float64)
    )
    for a, b in zip(params(resumed), params(straight)):
        assert torch.equal(a, b)
    for a, b in zip(resumed.epochs, straight.epochs):
        assert (a.epoch, a.loss, a.train_acc, a.val_acc, a.test_acc) == (
            b.epoch,
            b.loss,
            b.train_acc,
            b.val_acc,
            b.test_acc,
        )
    # The breakdown covers every stage; the model learns.
    for stats in straight.epochs:
        assert list(stats.times) == list(STAGES) and all(t >= 0 for t in stats.times.values())
        assert 0.0 <= stats.val_acc <= 1.0 and 0.0 <= stats.test_acc <= 1.0
    assert straight.epochs[1].loss < straight.epochs[0].loss


def test_a_flipped_float_in_the_newest_checkpoint_resumes_from_the_previous_one(mag, straight, tmp_path):
    written = train_minibatch(mag, "rgcn", epochs=2, checkpoint_dir=tmp_path, **SMALL, **OPTIONS)
    newest = tmp_path / "epoch2.pt"
    data = bytearray(newest.read_bytes())
    at = data.index(params(written)[0].numpy().tobytes())  # a weight's bytes in the tensor data
    data[at + 7] ^= 0x40  # one exponent bit of one float64
    newest.write_bytes(bytes(data))
    with pytest.warns(CheckpointWarning, match=r"epoch2\.pt: corrupt \(sha256.*manifest-epoch1\.json"):
        resumed = train_minibatch(mag, "rgcn", epochs=2, checkpoint_dir=tmp_path, resume=True, **SMALL, **OPTIONS)
    assert resumed.losses == straight.losses
    for a, b in zip(params(resumed), params(straight)):
        assert torch.equal(a, b)


def test_resume_errors_name_the_problem(mag, tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train_minibatch(mag, "rgcn", epochs=1, checkpoint_dir=tmp_path, resume=True, **SMALL, **OPTIONS)
    written = dict(SMALL, fanouts=[1, 1])
    train_minibatch(mag, "rgcn", epochs=1, checkpoint_dir=tmp_path, **written, **OPTIONS)
    changed = dict(written, batch_size=64)
    with pytest.raises(ValueError, match="batch_size: checkpoint 128, this run 64"):
        train_minibatch(mag, "rgcn", epochs=2, checkpoint_dir=tmp_path, resume=True, **changed, **OPTIONS)


def test_learnable_tables_train_and_can_be_chosen(mag, straight):
    before = train_minibatch(mag, "rgcn", epochs=0, **SMALL, **OPTIONS).embedding
    tables = {t: e.weight.detach().clone() for t, e in before.embeddings.items()}
    assert set(tables) == {"author", "institution", "field_of_study"}, "ogbn-mag: only papers have features"
    after = straight.embedding
    for t, old in tables.items():
        assert not torch.equal(after.embeddings[t].weight.detach(), old), t
    chosen = train_minibatch(mag, "rgcn", epochs=0, learnable=["author"], **SMALL, **OPTIONS).embedding
    assert set(chosen.embeddings) == {"author"}
    with pytest.raises(KeyError, match="nope"):
        train_minibatch(mag, "rgcn", epochs=0, learnable=["nope"], **SMALL, **OPTIONS)


@pytest.mark.parametrize("name", ["rgat", "hgt"])
def test_other_builders_train_one_epoch(mag, name):
    result = train_minibatch(mag, name, epochs=1, **SMALL, **OPTIONS)
    assert len(result.losses[0]) == 4 and all(torch.isfinite(torch.tensor(result.losses[0])))
    assert name in MODEL_BUILDERS


def test_cli_entry_prints_the_breakdown(capsys, tmp_path):
    assert (
        train.run_minibatch(
            "mag",
            scale=0.001,
            fanouts=[1, 1],
            batch_size=256,
            epochs=1,
            hidden=4,
            learnable=["non-target"],
            checkpoint_dir=tmp_path,
            progress=False,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert all(stage in out for stage in STAGES) and "final: val" in out
    assert (tmp_path / "epoch1.pt").is_file() and (tmp_path / "manifest-epoch1.json").is_file()


# ------------------------------------------------------- compiled vs eager
def forward_backward(model, blocks, x, weight):
    """Seed outputs of ``model`` on ``blocks`` and the gradients of a weighted sum of them."""
    x = x.detach().requires_grad_()
    params = list(model.parameters())
    for p in params:
        p.grad = None
    out = model(blocks, x)
    (out * weight).sum().backward()
    return out.detach(), [x.grad, *(p.grad for p in params)]


@pytest.mark.parametrize("name", list(MODEL_BUILDERS))
@pytest.mark.parametrize(
    "graph_seed, fanouts, target",
    [(0, [2, 3], "user"), (1, [-1, 2], "item"), (2, [3, 0], "user"), (3, [1, 2, 4], "item")],
)
def test_compiled_blocks_match_eager(name, graph_seed, fanouts, target):
    """Forward and gradients of the compiled stack on sampled blocks equal the eager executor's."""
    g = random_heterograph(graph_seed, sizes={"user": 12, "item": 10, "tag": 1}, edges_per_relation=40)
    torch.manual_seed(graph_seed)
    model = MODEL_BUILDERS[name](g, 8, 3, len(fanouts)).double()
    seeds = torch.randperm(g.num_nodes(target))[:7]
    blocks = NeighborSampler(g, fanouts, target, seed=graph_seed).sample(seeds)
    assert any(b.num_edges(("tag", "empty", "user")) == 0 for b in blocks)
    zero_in = [bool((b.in_degrees() == 0).any()) for b in blocks]  # one per destination node, as DGL
    assert any(zero_in), "some destination has no sampled in-edge"
    x = torch.randn(blocks[0].num_src_nodes(), 8, dtype=torch.float64)
    weight = torch.randn(seeds.numel(), 3, dtype=torch.float64)
    eager_out, eager_grads = forward_backward(model, blocks, x, weight)
    with recording() as plans:
        out, grads = forward_backward(gnnc.compile(model), blocks, x, weight)
    assert plans and all(p.dfg is not None for p in plans), "every block ran compiled, none fell back"
    torch.testing.assert_close(out, eager_out, rtol=1e-9, atol=1e-11)
    for got, want in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", list(MODEL_BUILDERS))
def test_blocks_of_one_schema_reuse_one_plan_per_layer(name, monkeypatch):
    """Batches of different sizes build and trace each layer's plan once, on the first batch."""
    compiled_runtime.clear_cache()
    builds, traces = [], []
    build, trace = compiled_runtime._compile, compiled_runtime.trace_udf
    monkeypatch.setattr(compiled_runtime, "_compile", lambda *a: builds.append(a[0]) or build(*a))
    monkeypatch.setattr(compiled_runtime, "trace_udf", lambda u, *a, **kw: traces.append(u) or trace(u, *a, **kw))
    g = random_heterograph(4, sizes={"user": 30, "item": 20, "tag": 1}, edges_per_relation=120)
    torch.manual_seed(0)
    model = gnnc.compile(MODEL_BUILDERS[name](g, 8, 3, 2).double())
    sampler = NeighborSampler(g, [3, 2], "user", seed=0)
    counts, sizes = [], set()
    for seeds in torch.randperm(30).split([3, 8, 5, 14]):
        blocks = sampler.sample(seeds)
        sizes.add(tuple(b.num_src_nodes() for b in blocks))
        x = torch.randn(blocks[0].num_src_nodes(), 8, dtype=torch.float64)
        model(blocks, x).sum().backward()
        counts.append((len(builds), len(traces)))
    assert len(sizes) == 4, "the batches' blocks differ in size"
    assert counts[0][0] == 2, "one plan per layer"
    assert counts == [counts[0]] * 4, "later batches build and trace nothing"


def test_trainer_compiles_by_default_and_matches_eager(mag):
    with recording() as plans:
        fast = train_minibatch(mag, "rgcn", epochs=1, **SMALL, **OPTIONS)
    assert plans and all(p.dfg is not None for p in plans)
    with recording() as none:
        slow = train_minibatch(mag, "rgcn", epochs=1, compiled=False, **SMALL, **OPTIONS)
    assert not none, "compiled=False runs the eager executor"
    torch.testing.assert_close(torch.tensor(fast.losses), torch.tensor(slow.losses), rtol=1e-9, atol=1e-12)
    for a, b in zip(params(fast), params(slow), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("flags, expected", [([], True), (["--compile"], True), (["--no-compile"], False)])
def test_cli_passes_compile_on(flags, expected, monkeypatch):
    seen = {}
    monkeypatch.setattr(train, "run_minibatch", lambda *a, **kw: seen.update(kw) or 0)
    args = build_parser().parse_args(["train", "--minibatch", *flags])
    assert args.func(args) == 0 and seen["compiled"] is expected


@pytest.mark.parametrize("name", list(MODEL_BUILDERS))
def test_a_finished_block_is_freed_without_the_garbage_collector(name):
    """Nothing the compiled step caches refers back to a block's index, so dropping the block frees it."""
    g = random_heterograph(5, sizes={"user": 20, "item": 12, "tag": 1}, edges_per_relation=60)
    model = gnnc.compile(MODEL_BUILDERS[name](g, 8, 3, 2).double())
    sampler = NeighborSampler(g, [3, 2], "user", seed=0)
    gc.collect()
    gc.disable()
    try:
        for seeds in (torch.arange(6), torch.arange(6, 14)):
            blocks = sampler.sample(seeds)
            model(blocks, torch.randn(blocks[0].num_src_nodes(), 8, dtype=torch.float64)).sum().backward()
            indexes = [weakref.ref(b.index) for b in blocks]
            del blocks
            assert all(ref() is None for ref in indexes)
    finally:
        gc.enable()
