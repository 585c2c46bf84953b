"""Per-type input embeddings and the lazy, per-row SparseAdam."""

import pytest
import torch
from torch import nn

from gnnc.nn import SparseAdam, TypedEmbedding

from .graphs import random_heterograph


def make_embedding(hidden=5):
    torch.manual_seed(0)
    counts = {"user": 9, "item": 7, "tag": 1}
    feats = {"user": torch.randn(9, 3, dtype=torch.float64), "tag": torch.randn(1, 11, dtype=torch.float64)}
    return TypedEmbedding(counts, hidden, features=feats, learnable={"item": 4}, dtype=torch.float64), feats


def test_rows_are_projected_per_type_in_request_order():
    emb, feats = make_embedding()
    ids = torch.tensor([16, 3, 9, 0, 12, 3, 15])  # tag, users, items, in mixed order, with a repeat
    out = emb(ids)
    assert out.shape == (7, 5)
    proj, table = emb.projections, emb.embeddings["item"].weight
    for row, i in enumerate(ids.tolist()):
        if i < 9:
            want = proj["user"](feats["user"][i])
        elif i < 16:
            want = proj["item"](table[i - 9])
        else:
            want = proj["tag"](feats["tag"][0])
        torch.testing.assert_close(out[row], want, rtol=1e-12, atol=1e-12)


def test_gradients_reach_only_the_rows_looked_up_and_features_stay_fixed():
    emb, feats = make_embedding()
    emb(torch.tensor([9, 11, 11, 0, 16])).sum().backward()
    grad = emb.embeddings["item"].weight.grad
    assert grad.is_sparse
    assert sorted(set(grad.coalesce().indices()[0].tolist())) == [0, 2]
    assert all(p.grad is not None for p in emb.dense_parameters())
    assert emb.sparse_parameters() == [emb.embeddings["item"].weight]
    assert not any(b.requires_grad for b in emb.buffers())
    assert "feature_0" not in emb.state_dict(), "read-only features are data, not checkpointed state"


def test_from_graph_and_type_errors():
    g = random_heterograph(0)
    g.nodes["user"].data["feat"] = torch.randn(9, 6)
    emb = TypedEmbedding.from_graph(g, 4, learnable_ntypes=["item", "tag"], embed_dim=2)
    assert emb(torch.arange(g.num_nodes())).shape == (17, 4)
    assert emb.embeddings["item"].weight.shape == (7, 2)
    with pytest.raises(KeyError, match="'item' has no 'feat'"):
        TypedEmbedding.from_graph(g, 4, learnable_ntypes=["tag"])
    with pytest.raises(ValueError, match="'user' has both"):
        TypedEmbedding({"user": 2}, 3, features={"user": torch.zeros(2, 1)}, learnable={"user": 2})
    with pytest.raises(ValueError, match="'item' has neither"):
        TypedEmbedding({"user": 2, "item": 1}, 3, features={"user": torch.zeros(2, 1)})
    with pytest.raises(IndexError, match=r"\[0, 17\)"):
        emb.fetch(torch.tensor([17]))


ALWAYS = [0, 1, 2]  # touched at every step
SOMETIMES = [5, 6, 7]  # touched at some steps
NEVER = [8, 9]  # never touched


def touched_rows(step):
    extra = [r for k, r in enumerate(SOMETIMES) if (step + k) % 2 == 0]
    return ALWAYS + extra + ALWAYS[:1]  # a repeated row: gradients must be summed


def run_sparse(weight, steps, grads_out=None, opt_state=None, start=0):
    emb = nn.Embedding(weight.shape[0], weight.shape[1], sparse=True, dtype=torch.float64)
    emb.weight.data.copy_(weight)
    opt = SparseAdam([emb.weight], lr=0.05)
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    for step in range(start, start + steps):
        gen = torch.Generator().manual_seed(step)
        rows = torch.tensor(touched_rows(step))
        coeff = torch.randn(rows.numel(), weight.shape[1], generator=gen, dtype=torch.float64)
        opt.zero_grad()
        (emb(rows) * coeff).pow(2).sum().backward()
        if grads_out is not None:
            grads_out.append(emb.weight.grad.coalesce().to_dense())
        opt.step()
    return emb.weight.detach(), opt


def test_sparse_adam_matches_dense_adam_on_rows_touched_every_step():
    torch.manual_seed(1)
    weight = torch.randn(10, 3, dtype=torch.float64)
    grads = []
    sparse_w, opt = run_sparse(weight, 6, grads)
    dense = nn.Parameter(weight.clone())
    adam = torch.optim.Adam([dense], lr=0.05, foreach=False)
    for g in grads:
        dense.grad = g
        adam.step()
    assert torch.equal(sparse_w[ALWAYS], dense.detach()[ALWAYS])
    state = opt.state[opt.param_groups[0]["params"][0]]
    dense_state = adam.state[dense]
    assert torch.equal(state["exp_avg"][ALWAYS], dense_state["exp_avg"][ALWAYS])
    assert torch.equal(state["exp_avg_sq"][ALWAYS], dense_state["exp_avg_sq"][ALWAYS])
    assert state["step"][ALWAYS].tolist() == [6, 6, 6]
    # Untouched rows and their state do not move (lazy semantics).
    assert torch.equal(sparse_w[NEVER], weight[NEVER])
    assert state["step"][NEVER].tolist() == [0, 0]
    assert not state["exp_avg"][NEVER].any() and not state["exp_avg_sq"][NEVER].any()
    # A row touched now and then follows Adam run on its touching steps only.
    for r in SOMETIMES:
        row = nn.Parameter(weight[r : r + 1].clone())
        row_adam = torch.optim.Adam([row], lr=0.05, foreach=False)
        touches = 0
        for g in grads:
            if g[r].any():
                row.grad = g[r : r + 1].clone()
                row_adam.step()
                touches += 1
        assert 0 < touches < 6
        assert state["step"][r] == touches
        assert torch.equal(sparse_w[r : r + 1], row.detach())
        assert not torch.equal(sparse_w[r : r + 1], dense.detach()[r : r + 1]), "dense Adam decays idle rows"


def test_sparse_adam_state_dict_resumes_exactly():
    torch.manual_seed(2)
    weight = torch.randn(10, 3, dtype=torch.float64)
    straight, _ = run_sparse(weight, 5)
    half, opt = run_sparse(weight, 2)
    resumed, _ = run_sparse(half, 3, opt_state=opt.state_dict(), start=2)
    assert torch.equal(straight, resumed)


def test_sparse_adam_rejects_dense_gradients_and_bad_hyperparameters():
    p = nn.Parameter(torch.zeros(3, 2))
    p.grad = torch.ones(3, 2)
    with pytest.raises(TypeError, match="dense gradient"):
        SparseAdam([p]).step()
    with pytest.raises(ValueError, match="lr"):
        SparseAdam([p], lr=0.0)
    with pytest.raises(ValueError, match="betas"):
        SparseAdam([p], betas=(0.9, 1.0))
