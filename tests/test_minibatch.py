"""Mini-batch trainer on a tiny mag replica: breakdown, learning, exact resume."""
import pytest
import torch

from gnnc.data import synthetic
from gnnc.data.sampler import NeighborSampler
from gnnc.minibatch import MODEL_BUILDERS, STAGES, MinibatchTrainer, run_cli, train_minibatch

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
    assert torch.equal(torch.tensor(resumed.losses, dtype=torch.float64),
                       torch.tensor(straight.losses, dtype=torch.float64))
    for a, b in zip(params(resumed), params(straight)):
        assert torch.equal(a, b)
    for a, b in zip(resumed.epochs, straight.epochs):
        assert (a.epoch, a.loss, a.train_acc, a.val_acc, a.test_acc) == (b.epoch, b.loss, b.train_acc,
                                                                         b.val_acc, b.test_acc)
    # The breakdown covers every stage; the model learns.
    for stats in straight.epochs:
        assert list(stats.times) == list(STAGES) and all(t >= 0 for t in stats.times.values())
        assert 0.0 <= stats.val_acc <= 1.0 and 0.0 <= stats.test_acc <= 1.0
    assert straight.epochs[1].loss < straight.epochs[0].loss


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
    assert run_cli("mag", scale=0.001, fanouts=[1, 1], batch_size=256, epochs=1, hidden=4,
                   learnable=["non-target"], checkpoint_dir=tmp_path, progress=False) == 0
    out = capsys.readouterr().out
    assert all(stage in out for stage in STAGES) and "final: val" in out
    assert (tmp_path / "checkpoint.pt").is_file()
