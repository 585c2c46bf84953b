"""Heterogeneous neighbor sampler: block invariants, randomness, and models on blocks."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import gnnc
from gnnc.data import neighbor_sampler as sampler_module
from gnnc.data.neighbor_sampler import Block, NeighborSampler, forward_blocks
from gnnc.models import HGTConv, RGATConv, RGCNConv

from .graphs import random_heterograph


def big_heterograph(seed=0):
    """Like random_heterograph but with degrees well above small fanouts."""
    return random_heterograph(seed, sizes={"user": 30, "item": 20, "tag": 1}, edges_per_relation=300)


def check_block(parent, block, dst_global, fanout):
    """Every documented property of one block whose destinations are ``dst_global``."""
    assert isinstance(block, Block)
    assert block.srctypes == block.dsttypes == parent.ntypes  # DGL's block.ntypes: both, one after the other
    assert block.canonical_etypes == parent.canonical_etypes
    src_ids = block.src_ids
    assert torch.unique(src_ids).numel() == src_ids.numel()
    # Nodes keep their parent's type, grouped by type.
    assert torch.equal(parent.node_type_ids()[src_ids], block.node_type_ids())
    # Destination nodes: the given ones, in order, as a prefix of each type.
    assert torch.equal(block.dst_ids, dst_global)
    offsets = block.index.ntype_offsets
    for t, n_dst in enumerate(block.num_dst_per_type):
        prefix = src_ids[offsets[t] : offsets[t] + n_dst]
        assert torch.equal(prefix, dst_global[parent.node_type_ids()[dst_global] == t])
        rest = src_ids[offsets[t] + n_dst : offsets[t + 1]]
        assert bool((rest[1:] > rest[:-1]).all()), "non-destination sources are sorted by parent id"
    # Every sampled edge is a parent edge of the same relation, taken once.
    eids = block.parent_eids
    assert torch.unique(eids).numel() == eids.numel()
    p_src, p_dst = parent.find_edges()
    b_src, b_dst = block.find_edges()
    assert torch.equal(p_src[eids], src_ids[b_src])
    assert torch.equal(p_dst[eids], src_ids[b_dst])
    assert torch.equal(parent.edge_type_ids()[eids], block.edge_type_ids())
    is_dst = torch.zeros(block.num_src_nodes(), dtype=torch.bool)
    is_dst[block.dst_index] = True
    assert bool(is_dst[b_dst].all()), "edges end at destination nodes"
    # Per (destination, relation): min(fanout, degree) edges, i.e. all of them when few.
    for rel in parent.canonical_etypes:
        dt = rel[2]
        local_dst = dst_global[parent.node_type_ids()[dst_global] == parent.ntype_id(dt)]
        local_dst = local_dst - parent.index.ntype_offsets[parent.ntype_id(dt)]
        degree = parent.in_degrees(etype=rel)[local_dst]
        want = degree if fanout < 0 else degree.clamp(max=fanout)
        got = block.in_degrees(etype=rel)[: local_dst.numel()]
        assert torch.equal(got, want), rel


def sample_and_check(g, fanouts, target, seeds, seed=0):
    sampler = NeighborSampler(g, fanouts, target, seed=seed)
    blocks = sampler.sample(seeds)
    assert len(blocks) == len(fanouts)
    dst = torch.as_tensor(seeds) + g.index.ntype_offsets[g.ntype_id(target)]
    for block, fanout in zip(reversed(blocks), reversed(fanouts)):
        check_block(g, block, dst, fanout)
        dst = block.src_ids
    for inner, outer in zip(blocks[:-1], blocks[1:]):
        assert torch.equal(inner.dst_ids, outer.src_ids), "block l's destinations are block l+1's nodes"
    return blocks


@pytest.mark.parametrize("fanouts", [[1, 2], [3, 3], [-1, -1], [0, 2], [2, 0], [1, 1, 1]])
@pytest.mark.parametrize("target, seeds", [("user", [0, 5, 8, 2]), ("item", [6, 0, 4])])
def test_block_invariants(fanouts, target, seeds):
    sample_and_check(big_heterograph(), fanouts, target, torch.tensor(seeds))
    sample_and_check(random_heterograph(1), fanouts, target, torch.tensor(seeds))


@settings(max_examples=30, deadline=None)
@given(
    graph_seed=st.integers(0, 10_000),
    users=st.integers(1, 25),
    items=st.integers(1, 25),
    edges=st.integers(0, 200),
    fanouts=st.lists(st.integers(-1, 6), min_size=1, max_size=3),
    data=st.data(),
)
def test_block_invariants_on_random_graphs(graph_seed, users, items, edges, fanouts, data):
    g = random_heterograph(graph_seed, sizes={"user": users, "item": items, "tag": 1}, edges_per_relation=edges)
    target = data.draw(st.sampled_from(["user", "item", "tag"]))
    n = g.num_nodes(target)
    seeds = data.draw(st.lists(st.integers(0, n - 1), min_size=0, max_size=n, unique=True))
    sample_and_check(g, fanouts, target, torch.tensor(seeds, dtype=torch.int64), seed=graph_seed)


def test_zero_in_degree_seeds_and_empty_relations():
    g = random_heterograph(0)
    deg = g.in_degrees(etype="likes")
    silent = torch.nonzero(deg == 0).squeeze(1)
    assert silent.numel() > 0
    blocks = sample_and_check(g, [2, 2], "item", silent)
    last = blocks[-1]
    assert last.num_edges() == 0
    assert torch.equal(last.dst_ids, silent + g.index.ntype_offsets[g.ntype_id("item")])
    assert last.num_src_nodes() == silent.numel()
    for b in sample_and_check(g, [2, 2], "user", torch.arange(9)):
        assert b.num_edges(("tag", "empty", "user")) == 0


def test_fanout_at_least_degree_takes_every_edge():
    g = big_heterograph()
    seeds = torch.arange(30)
    full = NeighborSampler(g, [-1], "user").sample(seeds)[0]
    wide = NeighborSampler(g, [1000], "user").sample(seeds)[0]
    assert torch.equal(full.parent_eids.sort().values, wide.parent_eids.sort().values)
    into_users = sum(g.num_edges(r) for r in g.canonical_etypes if r[2] == "user")
    assert full.num_edges() == into_users


def test_sampling_is_uniform_without_replacement():
    # 400 destinations with 4 in-edges each; fanout 2 picks 2 distinct of 4.
    n = 400
    dst = torch.arange(n).repeat_interleave(4)
    src = torch.arange(4 * n)
    g = gnnc.heterograph({("a", "r", "b"): (src, dst)}, num_nodes={"a": 4 * n, "b": n})
    block = NeighborSampler(g, [2], "b", seed=3).sample(torch.arange(n))[0]
    slot = block.parent_eids % 4
    counts = torch.bincount(slot, minlength=4)
    assert counts.sum() == 2 * n
    # Each slot is chosen with probability 1/2: 200 expected, sd 10.
    assert bool(((counts - n / 2).abs() < 50).all()), counts
    # Block edges run by destination, then parent position: two slots a < b per row.
    pairs = torch.bincount(slot.view(-1, 2) @ torch.tensor([4, 1]), minlength=16)
    # Six unordered pairs, each with probability 1/6: about 67 of 400, sd 7.5.
    nonzero = pairs[pairs > 0]
    assert nonzero.numel() == 6 and bool(((nonzero - n / 6).abs() < 30).all()), pairs


@pytest.mark.parametrize("floyd_max", [sampler_module.FLOYD_MAX_FANOUT, 0], ids=["floyd", "sorted-keys"])
def test_every_subset_is_equally_likely(floyd_max, monkeypatch):
    """Degree 6, fanout 3: each of the 20 subsets of in-edges comes up equally often, by either draw."""
    monkeypatch.setattr(sampler_module, "FLOYD_MAX_FANOUT", floyd_max)
    n, d, k = 2000, 6, 3
    g = gnnc.heterograph(
        {("a", "r", "b"): (torch.arange(n * d), torch.arange(n).repeat_interleave(d))}, num_nodes={"a": n * d, "b": n}
    )
    block = NeighborSampler(g, [k], "b", seed=11).sample(torch.arange(n))[0]
    slots = (block.parent_eids % d).view(n, k)
    assert torch.equal(block.parent_eids // d, torch.arange(n).repeat_interleave(k))
    assert bool((slots[:, 1:] > slots[:, :-1]).all()), "distinct, in parent order"
    counts = torch.bincount((2**slots).sum(1), minlength=2**d)
    seen = counts[counts > 0].double()
    assert seen.numel() == 20
    chi2 = float(((seen - n / 20) ** 2 / (n / 20)).sum())
    assert chi2 < 50, f"chi-square {chi2:.1f} with 19 degrees of freedom (p < 1e-4)"


def test_sorted_key_draw_keeps_block_invariants(monkeypatch):
    monkeypatch.setattr(sampler_module, "FLOYD_MAX_FANOUT", 0)
    sample_and_check(big_heterograph(1), [3, 2], "user", torch.tensor([4, 0, 11, 29, 7]))


@pytest.mark.parametrize("n_type, n_dst, n_cand", [(50, 10, 200), (1000, 3, 5), (20, 0, 0), (20, 20, 40), (30, 0, 12)])
def test_local_ids_by_table_equal_local_ids_by_sorting(n_type, n_dst, n_cand, monkeypatch):
    monkeypatch.setattr(sampler_module, "DENSE_IDS_FACTOR", 10**9)  # always the table
    gen = torch.Generator().manual_seed(n_type + n_dst)
    lo = 7
    dst = torch.randperm(n_type, generator=gen)[:n_dst] + lo
    cand = torch.cat([torch.randint(lo, lo + n_type, (n_cand,), generator=gen), dst[:2]])
    local, new = sampler_module._local_ids(dst, cand, lo, lo + n_type)
    want_local, want_new = sampler_module._local_ids_by_sorting(dst, cand)
    assert torch.equal(local, want_local) and torch.equal(new, want_new)
    # The documented numbering: destinations first in order, then the new nodes sorted.
    assert torch.equal(torch.cat([dst, new])[local], cand)
    assert bool((new[1:] > new[:-1]).all()) and not bool(torch.isin(new, dst).any())


def test_deterministic_given_seed_and_restorable_state():
    g = big_heterograph()
    seeds = torch.tensor([1, 4, 7, 9, 11])

    def signature(blocks):
        return [(b.src_ids.tolist(), b.parent_eids.tolist()) for b in blocks]

    a = NeighborSampler(g, [2, 2], "user", seed=5)
    b = NeighborSampler(g, [2, 2], "user", seed=5)
    first = signature(a.sample(seeds))
    assert first == signature(b.sample(seeds))
    assert first != signature(NeighborSampler(g, [2, 2], "user", seed=6).sample(seeds))
    state = a.state_dict()
    following = signature(a.sample(seeds))
    assert following != first, "the stream moves on between calls"
    a.load_state_dict(state)
    assert signature(a.sample(seeds)) == following


def test_bad_arguments_are_named():
    g = random_heterograph(0)
    with pytest.raises(ValueError, match="duplicates"):
        NeighborSampler(g, [2], "user").sample(torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="seed 9 is not a 'user' node"):
        NeighborSampler(g, [2], "user").sample(torch.tensor([9]))
    with pytest.raises(ValueError, match=r"fanouts\[1\]"):
        NeighborSampler(g, [2, -2], "user")
    with pytest.raises(TypeError, match="fanouts"):
        NeighborSampler(g, 5, "user")
    with pytest.raises(KeyError, match="nope"):
        NeighborSampler(g, [2], "nope")
    block = NeighborSampler(g, [2], "user").sample(torch.tensor([0, 1]))[0]
    with pytest.raises(ValueError, match="one per source node"):
        block.slice_dst(torch.zeros(block.num_src_nodes() + 1, 3))


def test_block_to_device_keeps_layout():
    g = random_heterograph(0)
    block = NeighborSampler(g, [2], "user").sample(torch.tensor([3, 0]))[0]
    moved = block.to("cpu")
    assert isinstance(moved, Block)
    assert moved.num_dst_per_type == block.num_dst_per_type
    assert torch.equal(moved.dst_ids, block.dst_ids) and torch.equal(moved.parent_eids, block.parent_eids)


def _layers(kind, g, dim):
    rels, ntypes = len(g.canonical_etypes), len(g.ntypes)
    if kind == "rgcn":
        return [RGCNConv(dim, dim, rels, num_bases=2), RGCNConv(dim, dim, rels)]
    if kind == "rgat":
        return [RGATConv(dim, dim // 2, rels, num_heads=2), RGATConv(dim, dim // 2, rels, num_heads=2)]
    return [HGTConv(dim, dim, ntypes, rels, num_heads=2), HGTConv(dim, dim, ntypes, rels, num_heads=2)]


@pytest.mark.parametrize("kind", ["rgcn", "rgat", "hgt"])
@pytest.mark.parametrize("fanout", [-1, 1000])
def test_models_on_full_fanout_blocks_match_full_graph(kind, fanout):
    torch.manual_seed(0)
    g = big_heterograph(2)
    dim = 6
    layers = [layer.double() for layer in _layers(kind, g, dim)]
    x = torch.randn(g.num_nodes(), dim, dtype=torch.float64)
    seeds = torch.tensor([3, 0, 17, 9, 25])
    seeds_global = seeds + g.index.ntype_offsets[g.ntype_id("user")]
    blocks = NeighborSampler(g, [fanout, fanout], "user").sample(seeds)

    one = blocks[-1].slice_dst(layers[0](blocks[-1], x[blocks[-1].src_ids]))
    torch.testing.assert_close(one, layers[0](g, x)[seeds_global], rtol=1e-6, atol=1e-9)

    full = layers[1](g, F.relu(layers[0](g, x)))[seeds_global]
    sampled = forward_blocks(layers, blocks, x[blocks[0].src_ids], activation=F.relu)
    torch.testing.assert_close(sampled, full, rtol=1e-6, atol=1e-9)

    sampled.sum().backward()
    grads = [p.grad.clone() for layer in layers for p in layer.parameters()]
    for layer in layers:
        layer.zero_grad()
    full.sum().backward()
    for got, p in zip(grads, [p for layer in layers for p in layer.parameters()]):
        torch.testing.assert_close(got, p.grad, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------ DGL's mini-batch module code on blocks
class SAGEConvForBoth(torch.nn.Module):
    """DGL's user guide (6.5, custom modules for mini-batch training), ``dgl`` renamed ``gnnc``."""

    def __init__(self, in_feats, out_feats):
        super().__init__()
        self.W = torch.nn.Linear(in_feats * 2, out_feats)

    def forward(self, graph, h):
        if graph.is_block:
            h_dst = h[: graph.number_of_dst_nodes()]
        else:
            h_dst = h
        with graph.local_scope():
            graph.srcdata["h"] = h
            graph.dstdata["h"] = h_dst
            graph.update_all(gnnc.function.copy_u("h", "m"), gnnc.function.mean("m", "h_neigh"))
            return F.relu(self.W(torch.cat([graph.dstdata["h"], graph.dstdata["h_neigh"]], 1)))


@pytest.mark.parametrize("compile_", [False, True])
def test_dgl_minibatch_module_code_runs_unchanged_on_a_block(compile_):
    from .graphs import random_homograph

    g = random_homograph(num_nodes=30, num_edges=120, seed=3)  # zero in-degree seeds, self loops, multi-edges
    torch.manual_seed(0)
    model = SAGEConvForBoth(5, 4).double()
    x = torch.randn(30, 5, dtype=torch.float64)
    seeds = torch.tensor([0, 7, 29, 3, 12])
    (block,) = NeighborSampler(g, [-1], g.ntypes[0], seed=0).sample(seeds)  # every in-edge: same as full graph
    run = gnnc.compile(model) if compile_ else model
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = run(block, x[block.src_ids])
    assert out.shape == (5, 4)
    torch.testing.assert_close(out, model(g, x)[seeds])
    assert "h" not in block.ndata  # local_scope undid the writes


def test_block_dstdata_holds_destination_rows_apart_from_srcdata():
    from .graphs import random_homograph

    g = random_homograph(num_nodes=20, num_edges=60, seed=1)
    (block,) = NeighborSampler(g, [2], g.ntypes[0], seed=0).sample(torch.tensor([4, 1, 9]))
    n_src, n_dst = block.num_src_nodes(), block.num_dst_nodes()
    assert block.is_block and not g.is_block and n_dst == 3 and n_src >= n_dst
    block.dstdata["er"] = torch.ones(3, 2)  # a destination-only feature: zeros on the other nodes
    assert block.ndata["er"].shape == (n_src, 2) and block.ndata["er"][3:].abs().sum() == 0
    torch.testing.assert_close(block.dstdata["er"], torch.ones(3, 2))
    h = torch.randn(n_src, 2)
    block.srcdata["h"] = h
    block.dstdata["h"] = h[:3] + 1  # DGL's destination frame: a value of its own, the source side's kept
    torch.testing.assert_close(block.srcdata["h"], h)
    torch.testing.assert_close(block.dstdata["h"], h[:3] + 1)
    with pytest.raises(ValueError, match=r"has 4 rows but the graph has 3 nodes"):
        block.dstdata["x"] = torch.zeros(4, 2)
