"""Heta's miss-penalty-aware feature cache: planning, accounting, consistency, ownership, training."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gnnc
from gnnc.data.neighbor_sampler import NeighborSampler
from gnnc.distributed import add_reverse_relations
from gnnc.distributed.cache import (
    FeatureCache,
    Hotness,
    add_sparse_grad,
    hottest_first,
    measure_transfer_cost,
    miss_penalty,
    modulo_owners,
    presample_hotness,
    split_budget,
)
from gnnc.nn import SparseAdam, TypedEmbedding
from gnnc.training.model_builders import rgcn

NTYPES = ["a", "b", "c"]


def hand_built(counts_seed=0, n=100):
    """Read-only 'a' (16-byte rows) and 'b' (64-byte rows), learnable 'c' (8-byte rows, footprint 32)."""
    gen = torch.Generator().manual_seed(counts_seed)
    features = {"a": torch.randn(n, 4, generator=gen), "b": torch.randn(n, 16, generator=gen)}
    learnable = {"c": nn.Parameter(torch.randn(n, 2, generator=gen))}
    # Distinct positive counts in a random order (hottest-first is unambiguous); totals 4 : 2 : 1.
    counts = {t: (torch.randperm(n, generator=gen) + 1) * k for t, k in zip(NTYPES, (4, 2, 1))}
    return features, learnable, counts


def all_rows(cache, t):
    with torch.no_grad():
        return cache.fetch(t, torch.arange(cache._store[t].shape[0]))


# ------------------------------------------------------------------ planning
def test_budget_split_follows_heta_formula_and_fills_hottest_first():
    features, learnable, counts = hand_built()
    hot = Hotness(counts, num_batches=4)
    o = {"a": 1e-9, "b": 2e-9, "c": 4e-9}  # seconds per cached byte
    weight = {t: float(counts[t].sum()) * o[t] for t in NTYPES}
    budget = 960
    cache = FeatureCache.from_hotness(hot, features, learnable, budget, ntypes=NTYPES, penalties=o)
    footprint = {"a": 16, "b": 64, "c": 3 * 8 + 8}  # learnable: row, exp_avg, exp_avg_sq, int64 step
    for t in NTYPES:
        plan = cache.plan[t]
        assert plan.footprint == footprint[t]
        assert plan.penalty == o[t]
        want_share = budget * weight[t] / sum(weight.values())
        assert plan.share_bytes == pytest.approx(want_share, rel=1e-12)
        assert plan.rows == int(want_share // footprint[t])
        ids = cache.cached_ids(t)
        assert torch.equal(ids, torch.argsort(counts[t], descending=True)[: plan.rows])
    assert cache.cache_bytes() <= budget
    # count x penalty is the same for the three types here (4 x 1, 2 x 2, 1 x 4), so they share the
    # budget in thirds: 320 bytes = 20 rows of 16, 5 of 64, 10 of 32.
    assert [cache.plan[t].rows for t in NTYPES] == [20, 5, 10]


def test_split_budget_water_fills_capped_types():
    assert split_budget(100, {"x": 1, "y": 1, "z": 2}, {"x": 10, "y": 1000, "z": 1000}) == pytest.approx(
        {"x": 10, "y": 30, "z": 60}
    )
    assert split_budget(100, {"x": 0, "y": 1}, {"x": 50, "y": 500}) == {"x": 0.0, "y": 100.0}
    assert split_budget(1000, {"x": 1, "y": 3}, {"x": 10, "y": 20}) == {"x": 10.0, "y": 20.0}
    assert split_budget(0, {"x": 1}, {"x": 10}) == {"x": 0.0}
    with pytest.raises(ValueError, match="non-negative"):
        split_budget(-1, {"x": 1}, {"x": 10})


def test_hottest_first_breaks_ties_by_id_and_respects_eligibility():
    counts = torch.tensor([3, 7, 3, 0, 7, 1])
    assert hottest_first(counts).tolist() == [1, 4, 0, 2, 5, 3]
    eligible = torch.tensor([True, False, True, True, True, False])
    assert hottest_first(counts, eligible).tolist() == [4, 0, 2, 3]


def test_never_accessed_rows_are_cached_only_after_every_accessed_row():
    features, learnable, counts = hand_built()
    counts["a"][50:] = 0
    hot = Hotness(counts, 1)
    penalties = dict.fromkeys(NTYPES, 1e-9)
    accessed_bytes = 50 * 16 + 100 * 64 + 100 * 32
    cache = FeatureCache.from_hotness(hot, features, learnable, accessed_bytes - 1, ntypes=NTYPES, penalties=penalties)
    assert set(cache.cached_ids("a").tolist()) <= set(range(50))
    cache = FeatureCache.from_hotness(
        hot, features, learnable, accessed_bytes + 10 * 16, ntypes=NTYPES, penalties=penalties
    )
    assert cache.cached_ids("a").numel() == 60
    assert set(range(50)) <= set(cache.cached_ids("a").tolist())


def test_zero_budget_and_budget_beyond_everything():
    features, learnable, counts = hand_built()
    counts["b"][:30] = 0  # some rows never accessed
    hot = Hotness(counts, 1)
    penalties = dict.fromkeys(NTYPES, 1e-9)
    ids = torch.tensor([5, 99, 0, 5, 42])
    for allocation in ("heta", "hotness", "random"):
        empty = FeatureCache.from_hotness(
            hot, features, learnable, 0, ntypes=NTYPES, penalties=penalties, allocation=allocation
        )
        assert empty.cache_bytes() == 0
        full = FeatureCache.from_hotness(
            hot, features, learnable, 10**9, ntypes=NTYPES, penalties=penalties, allocation=allocation
        )
        assert full.cache_bytes() == 100 * (16 + 64 + 32)
        for cache, hits in ((empty, 0), (full, 5)):
            for t in NTYPES:
                with torch.no_grad():
                    rows = cache.fetch(t, ids)
                store = {**features, **learnable}[t]
                assert torch.equal(rows, store.detach()[ids])
                assert cache.stats().per_type[t].hits == hits
                assert cache.stats().per_type[t].misses == 5 - hits


def test_hotness_and_random_allocations_stay_within_budget():
    features, learnable, counts = hand_built()
    hot = Hotness(counts, 1)
    penalties = dict.fromkeys(NTYPES, 1e-9)
    by_hotness = FeatureCache.from_hotness(
        hot, features, learnable, 2000, ntypes=NTYPES, penalties=penalties, allocation="hotness"
    )
    assert by_hotness.cache_bytes() <= 2000
    # Globally hottest: no uncached row is hotter than any cached row.
    coldest_cached = min(
        int(counts[t][by_hotness.cached_ids(t)].min()) for t in NTYPES if by_hotness.cached_ids(t).numel()
    )
    for t in NTYPES:
        uncached = torch.ones(100, dtype=torch.bool)
        uncached[by_hotness.cached_ids(t)] = False
        assert int(counts[t][uncached].max()) <= coldest_cached
    draws = [
        FeatureCache.from_hotness(
            hot, features, learnable, 2000, ntypes=NTYPES, penalties=penalties, allocation="random", seed=s
        )
        for s in (0, 0, 1)
    ]
    assert all(d.cache_bytes() <= 2000 for d in draws)
    assert all(torch.equal(draws[0].cached_ids(t), draws[1].cached_ids(t)) for t in NTYPES)
    assert any(not torch.equal(draws[0].cached_ids(t), draws[2].cached_ids(t)) for t in NTYPES)
    with pytest.raises(ValueError, match="allocation must be one of"):
        FeatureCache.from_hotness(hot, features, learnable, 10, ntypes=NTYPES, penalties=penalties, allocation="lru")


# ---------------------------------------------------------------- accounting
def test_hit_miss_accounting_is_exact_on_a_synthetic_stream():
    features, learnable, _ = hand_built()
    cached = {"a": torch.tensor([3, 1, 4, 15, 9]), "c": torch.tensor([2, 7, 18, 28])}
    cache = FeatureCache(features, learnable, cached, ntypes=NTYPES)
    gen = torch.Generator().manual_seed(1)
    expected = {t: [0, 0] for t in NTYPES}
    traffic = {"a": 16, "b": 64, "c": 8}  # without gradients a learnable miss only reads its row
    for _ in range(20):
        t = NTYPES[int(torch.randint(3, (1,), generator=gen))]
        ids = torch.randint(0, 100, (int(torch.randint(0, 30, (1,), generator=gen)),), generator=gen)
        with torch.no_grad():
            rows = cache.fetch(t, ids)
        store = {**features, **learnable}[t]
        assert torch.equal(rows, store.detach()[ids])
        hit = torch.isin(ids, cached.get(t, torch.zeros(0, dtype=torch.int64)))
        expected[t][0] += int(hit.sum())
        expected[t][1] += int((~hit).sum())
    stats = cache.stats()
    for t in NTYPES:
        s = stats.per_type[t]
        assert (s.hits, s.misses) == tuple(expected[t])
        assert s.bytes_moved == expected[t][1] * traffic[t]
        assert s.bytes_saved == expected[t][0] * traffic[t]
        assert s.cached_rows == len(cached.get(t, []))
    total = stats.total
    assert total.hits == sum(e[0] for e in expected.values())
    assert total.hit_rate == pytest.approx(total.hits / (total.hits + total.misses))
    cache.reset_stats()
    assert cache.stats().total.hits == 0 and math.isnan(cache.stats().per_type["a"].hit_rate)
    # Fetched for training, a learnable miss reads its row and Adam state and writes them back.
    cache.bind_optimizer(SparseAdam([learnable["c"]]))
    cache.fetch("c", torch.tensor([2, 3, 7, 5, 6]))
    s = cache.stats().per_type["c"]
    assert (s.hits, s.misses, s.bytes_moved, s.bytes_saved) == (2, 3, 3 * 2 * 32, 2 * 2 * 32)


def test_fetch_nodes_matches_typed_embedding_layout():
    features, learnable, counts = hand_built()
    emb = TypedEmbedding({t: 100 for t in NTYPES}, 3, features=features, learnable={"c": 2})
    with torch.no_grad():
        emb.embeddings["c"].weight.copy_(learnable["c"])
    cache = FeatureCache(
        features, {"c": emb.embeddings["c"].weight}, {"a": torch.arange(10), "c": torch.arange(5)}, ntypes=NTYPES
    )
    ids = torch.tensor([250, 3, 120, 0, 205, 99, 101])
    with torch.no_grad():
        got, want = cache.fetch_nodes(ids), emb.fetch(ids)
        assert got.num_nodes == want.num_nodes
        for (i, pos, rows), (j, wpos, wrows) in zip(got.parts, want.parts, strict=True):
            assert i == j and torch.equal(pos, wpos) and torch.equal(rows, wrows)
        assert torch.equal(emb.project(got), emb(ids))
    with pytest.raises(IndexError, match=r"\[0, 300\)"):
        cache.fetch_nodes(torch.tensor([300]))


# --------------------------------------------------------------- learnable
def train_steps(table, opt, fetch, steps=6, seed=3):
    """A few SparseAdam steps of a loss over rows ``fetch(ids)``; returns the fetched rows of each step."""
    gen = torch.Generator().manual_seed(seed)
    seen = []
    for _ in range(steps):
        ids = torch.randperm(table.shape[0], generator=gen)[:40]
        target = torch.randn(40, table.shape[1], generator=gen)
        rows = fetch(ids)
        seen.append(rows.detach().clone())
        opt.zero_grad()
        ((rows - target) ** 2).sum().backward()
        opt.step()
    return seen


@pytest.mark.parametrize("write_back_every_step", [True, False])
def test_learnable_rows_through_the_cache_follow_the_store_exactly(write_back_every_step):
    features, learnable, counts = hand_built()
    reference = nn.Parameter(learnable["c"].detach().clone())
    ref_opt = SparseAdam([reference], lr=0.1)
    ref_rows = train_steps(reference, ref_opt, lambda ids: F.embedding(ids, reference, sparse=True))

    initial = learnable["c"].detach().clone()
    cached = torch.arange(0, 100, 3)
    cache = FeatureCache(features, learnable, {"c": cached}, ntypes=NTYPES)
    opt = SparseAdam([learnable["c"]], lr=0.1)
    with pytest.raises(RuntimeError, match="bind_optimizer"):
        cache.fetch("c", torch.tensor([0]))
    cache.bind_optimizer(opt)

    def fetch(ids):
        rows = cache.fetch("c", ids)
        if write_back_every_step:
            # Store and cache agree before every step.
            assert torch.equal(all_rows(cache, "c"), learnable["c"].detach())
        return rows

    rows = train_steps(learnable["c"], _WriteBackAfterStep(opt, cache, write_back_every_step), fetch)
    for got, want in zip(rows, ref_rows, strict=True):
        assert torch.equal(got, want)
    assert torch.equal(all_rows(cache, "c"), reference.detach())  # the cache always serves the latest rows
    s = cache.stats().per_type["c"]
    assert s.hits > 0 and s.misses > 0
    if not write_back_every_step:
        # One version per row: cached rows were updated in the cache only, the rest in the store only.
        assert torch.equal(learnable["c"].detach()[cached], initial[cached])
        others = torch.ones(100, dtype=torch.bool)
        others[cached] = False
        assert torch.equal(learnable["c"].detach()[others], reference.detach()[others])
        assert not torch.equal(initial[cached], reference.detach()[cached])
    cache.write_back()
    assert torch.equal(learnable["c"].detach(), reference.detach())
    for k in ("step", "exp_avg", "exp_avg_sq"):
        assert torch.equal(opt.state[learnable["c"]][k], ref_opt.state[reference][k])
    assert cache.write_back() == 0  # nothing left to write


class _WriteBackAfterStep:
    """The optimizer as a trainer drives it: step, then (optionally) write the cache back."""

    def __init__(self, opt, cache, every_step):
        self.opt, self.cache, self.every_step = opt, cache, every_step

    def zero_grad(self):
        self.opt.zero_grad()

    def step(self):
        self.opt.step()
        if self.every_step:
            self.cache.write_back()


def test_bind_takes_over_existing_optimizer_state():
    features, learnable, _ = hand_built()
    reference = nn.Parameter(learnable["c"].detach().clone())
    ref_opt = SparseAdam([reference], lr=0.05)
    opt = SparseAdam([learnable["c"]], lr=0.05)
    # Two steps without a cache, so the store has optimizer state when the cache takes rows over.
    train_steps(reference, ref_opt, lambda ids: F.embedding(ids, reference, sparse=True), steps=2, seed=5)
    train_steps(learnable["c"], opt, lambda ids: F.embedding(ids, learnable["c"], sparse=True), steps=2, seed=5)
    cache = FeatureCache(features, learnable, {"c": torch.arange(50)}, ntypes=NTYPES)
    cache.bind_optimizer(opt)
    assert opt.param_groups[-1]["lr"] == 0.05
    train_steps(reference, ref_opt, lambda ids: F.embedding(ids, reference, sparse=True), steps=3, seed=6)
    train_steps(learnable["c"], opt, lambda ids: cache.fetch("c", ids), steps=3, seed=6)
    cache.write_back()
    assert torch.equal(learnable["c"].detach(), reference.detach())
    with pytest.raises(RuntimeError, match="already bound"):
        cache.bind_optimizer(opt)
    with pytest.raises(TypeError, match="SparseAdam"):
        FeatureCache(features, learnable, {"c": [1]}, ntypes=NTYPES).bind_optimizer(
            torch.optim.SparseAdam([learnable["c"]])
        )
    with pytest.raises(ValueError, match="does not update the table of 'c'"):
        FeatureCache(features, learnable, {"c": [1]}, ntypes=NTYPES).bind_optimizer(
            SparseAdam([nn.Parameter(torch.zeros(3, 2))])
        )


def test_gradients_received_from_elsewhere_update_each_row_where_it_lives():
    """A worker's own lookups plus gradients other workers send for its rows: identical to the store alone."""
    features, learnable, _ = hand_built()
    reference = nn.Parameter(learnable["c"].detach().clone())
    ref_opt = SparseAdam([reference], lr=0.1)
    cache = FeatureCache(features, learnable, {"c": torch.arange(0, 100, 2)}, ntypes=NTYPES)
    opt = SparseAdam([learnable["c"]], lr=0.1)
    cache.bind_optimizer(opt)
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        ids, sent = torch.randperm(100, generator=gen)[:30], torch.randperm(100, generator=gen)[:25]
        target, received = torch.randn(30, 2, generator=gen), torch.randn(25, 2, generator=gen)
        for table, fetch, accumulate, optimizer in (
            (
                reference,
                lambda i: F.embedding(i, reference, sparse=True),
                lambda i, v: add_sparse_grad(reference, i, v),
                ref_opt,
            ),
            (learnable["c"], lambda i: cache.fetch("c", i), lambda i, v: cache.accumulate_grad("c", i, v), opt),
        ):
            optimizer.zero_grad()
            ((fetch(ids) - target) ** 2).sum().backward()
            accumulate(sent, received)
            optimizer.step()
        assert cache.write_back() > 0
        assert torch.equal(learnable["c"].detach(), reference.detach())
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(opt.state[learnable["c"]][k], ref_opt.state[reference][k])
    with pytest.raises(ValueError, match="read-only"):
        cache.accumulate_grad("a", torch.tensor([0]), torch.zeros(1, 4))
    with pytest.raises(ValueError, match="values of shape"):
        cache.accumulate_grad("c", torch.tensor([0, 1]), torch.zeros(1, 2))


# ----------------------------------------------------------------- ownership
def test_learnable_rows_have_one_owner_across_two_workers():
    features, learnable, counts = hand_built()
    hot = Hotness(counts, 1)
    owners = modulo_owners({t: 100 for t in NTYPES}, 2)
    caches = [
        FeatureCache.from_hotness(
            hot, features, learnable, 10**9, ntypes=NTYPES, penalties=dict.fromkeys(NTYPES, 1e-9), owners=owners, rank=r
        )
        for r in (0, 1)
    ]
    held = [set(c.cached_ids("c").tolist()) for c in caches]
    assert not held[0] & held[1]
    assert held[0] | held[1] == set(range(100))
    for r, c in enumerate(caches):
        assert bool((c.owner("c", c.cached_ids("c")) == r).all())
        # Read-only rows are replicated: both workers hold all of them.
        assert c.cached_ids("a").numel() == 100
    # Limited budget: each worker fills its share with its own hottest rows only.
    small = [
        FeatureCache.from_hotness(
            hot, features, learnable, 500, ntypes=NTYPES, penalties=dict.fromkeys(NTYPES, 1e-9), owners=owners, rank=r
        )
        for r in (0, 1)
    ]
    for r, c in enumerate(small):
        ids = c.cached_ids("c")
        assert ids.numel() > 0 and bool((ids % 2 == r).all())
        mine = torch.arange(r, 100, 2)
        assert torch.equal(ids, mine[torch.argsort(counts["c"][mine], descending=True)][: ids.numel()])
        assert c.plan["c"].count == int(counts["c"][mine].sum())
    with pytest.raises(ValueError, match="belongs to worker 1, not 0"):
        FeatureCache(features, learnable, {"c": torch.tensor([0, 1])}, ntypes=NTYPES, owners=owners, rank=0)
    # A worker serves its own learnable rows, refuses the other worker's, and serves any read-only row.
    with torch.no_grad():
        assert torch.equal(small[1].fetch("c", torch.tensor([1, 5, 99])), learnable["c"].detach()[[1, 5, 99]])
        with pytest.raises(ValueError, match="row 4 of 'c' belongs to worker 0, not 1; fetch it through its owner"):
            small[1].fetch("c", torch.tensor([1, 4]))
        assert torch.equal(small[1].fetch("a", torch.tensor([0, 1])), features["a"][:2])
    with pytest.raises(ValueError, match="one owner per row"):
        FeatureCache(features, learnable, {}, ntypes=NTYPES, owners={"c": torch.zeros(3)})
    with pytest.raises(KeyError, match="no ownership map for node type 'b'"):
        FeatureCache(features, learnable, {}, ntypes=NTYPES, owners={"c": owners["c"]}).owner("b", [0])


# ------------------------------------------------------- sampler and training
@pytest.fixture(scope="module")
def mag():
    ds = gnnc.data.synthetic("mag", scale=0.001)
    g = add_reverse_relations(ds.graph)
    train = torch.nonzero(g.nodes["paper"].data["train_mask"]).squeeze(1)
    return ds, g, train


def test_presampling_counts_input_nodes_and_leaves_the_sampler_alone(mag):
    _, g, train = mag
    sampler = NeighborSampler(g, [4, 3], "paper", seed=7)
    before = sampler.state_dict()["generator"].clone()
    hot = presample_hotness(sampler, train, num_batches=3, batch_size=100, seed=11)
    assert torch.equal(sampler.state_dict()["generator"], before)
    # The same three batches, drawn by hand.
    shuffle = torch.Generator().manual_seed(11)
    manual = NeighborSampler(g, [4, 3], "paper", seed=11)
    order = train[torch.randperm(train.numel(), generator=shuffle)]
    total = torch.zeros(g.num_nodes(), dtype=torch.int64)
    for batch in order.split(100)[:3]:
        total += torch.bincount(manual.sample(batch)[0].src_ids, minlength=g.num_nodes())
    offsets = g.index.ntype_offsets
    for i, t in enumerate(g.ntypes):
        assert torch.equal(hot.counts[t], total[offsets[i] : offsets[i + 1]])
    assert hot.num_batches == 3
    assert int(hot.counts["paper"].max()) <= 3
    # Default: two passes over the seeds.
    assert presample_hotness(sampler, train[:250], batch_size=100).num_batches == 6


def test_build_measures_penalties_and_respects_the_budget(mag):
    _, g, train = mag
    sampler = NeighborSampler(g, [4, 3], "paper", seed=0)
    emb = TypedEmbedding.from_graph(g, 8, ["author", "institution", "field_of_study"])
    features = {"paper": g.nodes["paper"].data["feat"]}
    learnable = {t: emb.embeddings[t].weight for t in emb.embeddings}
    cache = FeatureCache.build(sampler, features, learnable, 20_000, "cpu", 2, train, batch_size=64)
    assert 0 < cache.cache_bytes() <= 20_000
    for t, plan in cache.plan.items():
        assert math.isfinite(plan.penalty) and plan.penalty > 0, t
    assert all(cache.plan[t].learnable for t in learnable) and not cache.plan["paper"].learnable
    # Timing a write puts back the values read: the store is unchanged.
    before = features["paper"].clone()
    assert measure_transfer_cost(features["paper"], "cpu", 50, write=True) > 0
    assert torch.equal(features["paper"], before)
    table = learnable["author"]
    assert miss_penalty(table, "cpu", 50, learnable=True) > 0 and table.grad is None


def test_training_with_the_cache_gives_identical_parameters(mag):
    ds, g, train = mag
    learnable_types = ["author", "institution", "field_of_study"]

    def setup():
        torch.manual_seed(0)
        emb = TypedEmbedding.from_graph(g, 8, learnable_types)
        model = rgcn(g, 8, ds.num_classes, 2)
        dense = torch.optim.Adam(list(model.parameters()) + emb.dense_parameters(), lr=0.01)
        sparse = SparseAdam(emb.sparse_parameters(), lr=0.05)
        return emb, model, dense, sparse, NeighborSampler(g, [4, 3], "paper", seed=1)

    def run(emb, model, dense, sparse, sampler, fetch, after_step):
        losses = []
        for seeds in train[:160].split(40):
            blocks = sampler.sample(seeds)
            logits = model(blocks, emb.project(fetch(blocks[0].src_ids)))
            loss = F.cross_entropy(logits, g.nodes["paper"].data["label"][seeds])
            dense.zero_grad()
            sparse.zero_grad()
            loss.backward()
            dense.step()
            sparse.step()
            after_step()
            losses.append(loss.item())
        return losses

    ref = setup()
    ref_losses = run(*ref, fetch=ref[0].fetch, after_step=lambda: None)

    emb, model, dense, sparse, sampler = setup()
    features = {"paper": g.nodes["paper"].data["feat"]}
    tables = {t: emb.embeddings[t].weight for t in learnable_types}
    total = sum(x.numel() * x.element_size() for x in [*features.values(), *tables.values()])
    cache = FeatureCache.build(
        sampler, features, tables, total // 4, "cpu", 4, train, batch_size=40, penalties=dict.fromkeys(g.ntypes, 1e-9)
    )
    cache.bind_optimizer(sparse)
    losses = run(emb, model, dense, sparse, sampler, fetch=cache.fetch_nodes, after_step=cache.write_back)
    assert losses == ref_losses
    for (name, p), (_, q) in zip(emb.named_parameters(), ref[0].named_parameters(), strict=True):
        assert torch.equal(p, q), name
    for p, q in zip(model.parameters(), ref[1].parameters(), strict=True):
        assert torch.equal(p, q)
    for t in learnable_types:
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(sparse.state[tables[t]][k], ref[3].state[ref[0].embeddings[t].weight][k])
    stats = cache.stats().per_type
    for t in ("paper", "author"):
        assert stats[t].hits > 0 and stats[t].misses > 0, t


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_cache_serves_store_rows_and_trains_identically():
    features, learnable, counts = hand_built()
    reference = nn.Parameter(learnable["c"].detach().clone())
    ref_opt = SparseAdam([reference], lr=0.1)
    ref_rows = train_steps(reference, ref_opt, lambda ids: F.embedding(ids, reference, sparse=True))
    cache = FeatureCache.from_hotness(
        Hotness(counts, 1), features, learnable, 3000, "cuda", ntypes=NTYPES, penalties=dict.fromkeys(NTYPES, 1e-9)
    )
    assert miss_penalty(features["b"], "cuda", 10, learnable=False) > 0
    opt = SparseAdam([learnable["c"]], lr=0.1)
    cache.bind_optimizer(opt)
    with torch.no_grad():
        assert cache.fetch("c", torch.tensor([0, 1])).device.type == "cuda"
    rows = train_steps(learnable["c"], opt, lambda ids: cache.fetch("c", ids.cuda()).cpu())
    assert cache.stats().per_type["c"].hits > 0
    for got, want in zip(rows, ref_rows, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    cache.write_back()
    torch.testing.assert_close(learnable["c"].detach(), reference.detach(), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        ids = torch.arange(100, device="cuda")
        assert torch.equal(cache.fetch("a", ids).cpu(), features["a"])
