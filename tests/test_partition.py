"""Partitioning: Heta meta-partitioning, edge-cut baselines, on-disk format."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

import numpy as np
import pytest
import torch

import gnnc
from gnnc.cli.partition import add_parser as add_partition_parser
from gnnc.distributed import (
    MetaTree,
    WeightedMetagraph,
    add_reverse_relations,
    build_metatree,
    edge_cut,
    edge_cut_partition,
    load_partitions,
    lpt_assign,
    meta_partition,
    metatree_from_metapaths,
    metis_owner,
    metis_partition,
    plan_meta_partitions,
    random_owner,
    random_partition,
    replica_counts,
    save_partitions,
    split_metatree,
    target_share,
    typed_subgraph,
)
from gnnc.distributed.partition_io import FILES, MANIFEST

from .graphs import random_heterograph

P, A, INST, F = "paper", "author", "institution", "field_of_study"
WRITES, CITES, HAS_TOPIC, AFFIL = (A, "writes", P), (P, "cites", P), (P, "has_topic", F), (A, "affiliated_with", INST)
REV_WRITES, REV_TOPIC, REV_AFFIL = (P, "rev_writes", A), (F, "rev_has_topic", P), (INST, "rev_affiliated_with", A)

# ogbn-mag's published counts with 'cites' in both directions, as Heta uses them (Figure 6).
OGBN_MAG = WeightedMetagraph(
    {P: 736_389, A: 1_134_649, INST: 8_740, F: 59_965},
    {P: 0, A: 0, INST: 0, F: 0},
    {
        WRITES: 7_145_660,
        CITES: 2 * 5_416_271,
        HAS_TOPIC: 7_505_078,
        AFFIL: 1_043_998,
        REV_WRITES: 7_145_660,
        REV_TOPIC: 7_505_078,
        REV_AFFIL: 1_043_998,
    },
)


@pytest.fixture(scope="module")
def mag():
    """The mag replica with reverse relations (7 relations), features on every type."""
    return add_reverse_relations(gnnc.data.synthetic("mag", scale=0.001).graph)


def edge_set(src, dst):
    return sorted(zip(src.tolist(), dst.tolist()))


# ------------------------------------------------------------------ metagraph
def test_reverse_relations_of_mag(mag):
    base = gnnc.data.synthetic("mag", scale=0.001).graph
    assert mag.canonical_etypes == [AFFIL, WRITES, REV_TOPIC, REV_AFFIL, CITES, HAS_TOPIC, REV_WRITES]  # DGL's order
    for fwd, rev in ((WRITES, REV_WRITES), (HAS_TOPIC, REV_TOPIC), (AFFIL, REV_AFFIL)):
        src, dst = base.find_edges(fwd)
        rsrc, rdst = mag.find_edges(rev)
        assert torch.equal(rsrc, dst) and torch.equal(rdst, src)
    src, dst = mag.find_edges(CITES)
    assert edge_set(src, dst) == edge_set(dst, src)  # symmetric in place
    assert base.num_edges(CITES) < mag.num_edges(CITES) <= 2 * base.num_edges(CITES)
    for t in mag.ntypes:
        for key, value in base.nodes[t].data.items():
            assert torch.equal(mag.nodes[t].data[key], value)
    again = add_reverse_relations(mag)  # every relation has its reverse now
    assert again.metagraph() == mag.metagraph()


def test_reverse_relations_keep_edge_features_and_multiplicities():
    g = gnnc.heterograph(
        {("u", "f", "u"): ([0, 0, 1, 2], [1, 1, 0, 2]), ("u", "to", "v"): ([0, 1], [1, 0])}, num_nodes={"u": 3, "v": 2}
    )
    g.edges[("u", "f", "u")].data["w"] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    g.edges[("u", "to", "v")].data["w"] = torch.tensor([5.0, 6.0])
    g.etype_data["p"] = torch.tensor([[10.0], [20.0]])
    out = add_reverse_relations(g)
    assert out.canonical_etypes == [("u", "f", "u"), ("u", "to", "v"), ("v", "rev_to", "u")]
    src, dst = out.find_edges(("u", "f", "u"))
    # (0,1) twice needs two (1,0): one exists, so the second copy of (0,1) is flipped.
    assert src.tolist() == [0, 0, 1, 2, 1] and dst.tolist() == [1, 1, 0, 2, 0]
    assert out.edges[("u", "f", "u")].data["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 2.0]
    assert out.edges[("v", "rev_to", "u")].data["w"].tolist() == [5.0, 6.0]
    assert out.etype_data["p"].flatten().tolist() == [10.0, 20.0, 20.0]
    # a reverse relation sorted among the others (DGL's order) still copies its relation's row
    three = gnnc.heterograph({("a", "x", "b"): ([0], [1]), ("c", "y", "c"): ([0], [0])})
    three.etype_data["p"] = torch.tensor([1.0, 2.0])
    again = add_reverse_relations(three)
    assert again.canonical_etypes == [("a", "x", "b"), ("b", "rev_x", "a"), ("c", "y", "c")]
    assert again.etype_data["p"].tolist() == [1.0, 1.0, 2.0]
    plain = add_reverse_relations(g, symmetrize_same_type=False)
    assert ("u", "rev_f", "u") in plain.canonical_etypes
    taken = gnnc.heterograph({("u", "to", "v"): ([0], [1]), ("v", "rev_to", "u"): ([0], [0])})
    with pytest.raises(ValueError, match="rev_to"):
        add_reverse_relations(taken)


def test_weighted_metagraph_of_graph(mag):
    mg = WeightedMetagraph.of(mag)
    assert mg.node_counts == {t: mag.num_nodes(t) for t in mag.ntypes}
    assert mg.edge_counts[CITES] == mag.num_edges(CITES)
    assert mg.feature_bytes[A] == mag.num_nodes(A) * 64 * 4  # float32 'feat' of width 64
    assert mg.in_relations(P) == [WRITES, REV_TOPIC, CITES]
    assert mg.resolve("rev_writes") == REV_WRITES
    with pytest.raises(KeyError, match="nope"):
        mg.resolve("nope")


# ------------------------------------------------------------------- metatree
def test_metatree_of_ogbn_mag_is_figure_6():
    tree = build_metatree(OGBN_MAG, P, depth=2)
    leaf = lambda rel: MetaTree(rel[0], rel)
    expected = MetaTree(
        P,
        None,
        (
            MetaTree(A, WRITES, (leaf(REV_WRITES), leaf(REV_AFFIL))),
            MetaTree(P, CITES, (leaf(WRITES), leaf(CITES), leaf(REV_TOPIC))),
            MetaTree(F, REV_TOPIC, (leaf(HAS_TOPIC),)),
        ),
    )
    assert tree == expected
    assert MetaTree.from_json(json.loads(json.dumps(tree.to_json()))) == tree
    weights = {s.child.relation: s.weight for s in split_metatree(tree, OGBN_MAG)}
    # Figure 6: 17, 27 and 16 million (distinct node types and relations counted once).
    assert weights == {WRITES: 17_215_096, CITES: 27_414_283, REV_TOPIC: 15_806_510}
    plan = plan_meta_partitions(OGBN_MAG, P, 2)
    assert [s.child.relation for s in plan.subtrees] == [CITES, WRITES, REV_TOPIC]
    assert [a.subtrees for a in plan.assignments] == [(0,), (1, 2)]
    stats = []
    for part in range(2):
        rels = plan.relations(part, OGBN_MAG.relations)
        nodes = sum(OGBN_MAG.node_counts[t] for t in plan.node_types(part, OGBN_MAG.ntypes))
        stats.append((len(rels), round(nodes / 1e6, 1), round(sum(OGBN_MAG.edge_counts[r] for r in rels) / 1e6)))
    # Step 4: Partition 2 (here part 0) has 3 relations, 1.9M nodes, 25M edges; Partition 1 5, 1.9M, 30M.
    assert stats == [(3, 1.9, 25), (5, 1.9, 30)]


def test_metatree_depth_one_and_metapaths():
    assert build_metatree(OGBN_MAG, P, 1) == MetaTree(
        P, None, tuple(MetaTree(r[0], r) for r in (WRITES, CITES, REV_TOPIC))
    )
    tree = metatree_from_metapaths(
        OGBN_MAG, P, [["writes", "rev_writes"], ["writes", "rev_affiliated_with"], [REV_TOPIC]]
    )
    assert tree == MetaTree(
        P, None, (MetaTree(A, WRITES, (MetaTree(P, REV_WRITES), MetaTree(INST, REV_AFFIL))), MetaTree(F, REV_TOPIC))
    )
    with pytest.raises(ValueError, match="does not end at 'author'"):
        metatree_from_metapaths(OGBN_MAG, P, [["writes", "cites"]])
    with pytest.raises(KeyError, match="unknown target"):
        build_metatree(OGBN_MAG, "venue", 2)
    with pytest.raises(ValueError, match="no relation ends at target"):
        plan_meta_partitions(WeightedMetagraph({"a": 1, "b": 1}, {"a": 0, "b": 0}, {("a", "x", "b"): 1}), "a", 2)


# ----------------------------------------------------------------- assignment
def test_lpt_assignment():
    groups, loads = lpt_assign([6, 10, 3, 5, 4], 2)
    # 10 -> p0, 6 -> p1, 5 -> p1 (11), 4 -> p0 (14), 3 -> p1 (14)
    assert groups == [[1, 4], [0, 3, 2]] and loads == [14, 14]
    groups, loads = lpt_assign([5, 0, 0], 3)
    assert all(groups) and loads == [5, 0, 0]
    groups, _ = lpt_assign([3, 3, 2, 2, 2], 2)
    assert sorted(sorted(g) for g in groups) == [[0, 2, 4], [1, 3]]


def test_replication_when_parts_exceed_subtrees(mag):
    assert replica_counts([10, 4], 5) == [3, 2]  # 10/1 -> 10/2 -> 10/3 < 4 -> 4/2
    assert replica_counts([10, 4], 2) == [1, 1]
    pg = meta_partition(mag, P, 4)
    shares = [(tuple(p.info["root_relations"][0]), tuple(p.info["replica"])) for p in pg.parts]
    assert shares == [(CITES, (0, 2)), (CITES, (1, 2)), (WRITES, (0, 1)), (REV_TOPIC, (0, 1))]
    first, second = target_share(pg.parts[0]), target_share(pg.parts[1])
    assert torch.equal(torch.sort(torch.cat([first, second])).values, torch.arange(mag.num_nodes(P)))
    assert pg.parts[0].relations == pg.parts[1].relations
    assert pg.parts[0].info["load"] == pytest.approx(pg.params["subtree_weights"][0] / 2)
    seven = meta_partition(mag, P, 7)
    assert all(p.relations and P in p.node_types for p in seven.parts)
    replicas = {}
    for p in seven.parts:
        replicas.setdefault(tuple(p.info["root_relations"][0]), []).append(target_share(p))
    for root, shares in replicas.items():  # replicas split their targets exactly
        assert torch.equal(torch.sort(torch.cat(shares)).values, torch.arange(mag.num_nodes(P))), root


def test_homogeneous_graph_replicates_its_single_subtree():
    g = gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=4)
    pg = meta_partition(g, g.ntypes[0], 3)
    assert [p.info["replica"] for p in pg.parts] == [[0, 3], [1, 3], [2, 3]]
    assert all(p.num_edges == 4 and not p.boundary for p in pg.parts)


# --------------------------------------------------------- meta partitions
def _tree_paths(obj, prefix=()):
    """Relation paths from the root to every vertex below it."""
    out = []
    for child in obj["children"]:
        path = prefix + (tuple(child["relation"]),)
        out.append(path)
        out.extend(_tree_paths(child, path))
    return out


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_meta_partitions_of_mag(mag, parts):
    pg = meta_partition(mag, P, parts)
    assert pg.num_parts == parts
    tree = MetaTree.from_json(pg.params["tree"])
    held = {rel for p in pg.parts for rel in p.relations}
    assert set(tree.links()) <= held  # every metatree relation is somewhere
    groups = {}
    for p in pg.parts:
        groups.setdefault(json.dumps(p.info["subtrees"]), p)
        assert P in p.node_types and p.node_counts[P] == mag.num_nodes(P)  # all target nodes
        assert len(set(p.relations)) == len(p.relations)  # deduplicated
        for rel in p.relations:  # complete mono-relation subgraphs
            assert p.graph.num_edges(rel) == mag.num_edges(rel)
            assert all(torch.equal(x, y) for x, y in zip(p.graph.find_edges(rel), mag.find_edges(rel)))
        for t in p.node_types:
            assert p.node_counts[t] == mag.num_nodes(t)
            assert torch.equal(p.node_feats[t]["feat"], mag.nodes[t].data["feat"])
        assert torch.equal(p.node_feats[P]["label"], mag.nodes[P].data["label"])
    # The root relations of the replica groups split the root's children exactly (no double counting).
    roots = sorted(tuple(r) for p in groups.values() for r in p.info["root_relations"])
    assert roots == sorted(child.relation for child in tree.children)
    # Below the root every metatree vertex belongs to one group, so only the root (the target type)
    # combines messages of several parts...
    seen = {}
    for key, p in groups.items():
        for sub in p.info["subtrees"]:
            for path in _tree_paths({"children": [sub]}):
                assert seen.setdefault(path, key) == key
    # ... and the boundary nodes are exactly the targets with in-edges from two groups' root relations.
    receives = []
    for p in groups.values():
        hit = torch.zeros(mag.num_nodes(P), dtype=torch.bool)
        for rel in p.info["root_relations"]:
            hit[mag.find_edges(tuple(rel))[1]] = True
        receives.append(hit)
    shared = torch.stack(receives).sum(0) >= 2
    for p in pg.parts:
        assert set(p.boundary) == {P}  # Figure 6: boundary nodes are target nodes only
        share = target_share(p)
        mine = torch.zeros_like(shared)
        for rel in p.info["root_relations"]:
            mine[mag.find_edges(tuple(rel))[1]] = True
        expected = share[(shared & mine)[share]]
        assert torch.equal(p.boundary[P], expected)
    edges = [p.num_edges for p in pg.parts]
    assert pg.balance()["edges"] == pytest.approx(max(edges) / (sum(edges) / parts))


# ------------------------------------------------------------ edge-cut parts
def _check_edge_cut(g, pg, owner):
    offsets = dict(zip(g.ntypes, np.cumsum([0] + [g.num_nodes(t) for t in g.ntypes])[:-1].tolist()))
    for t in g.ntypes:  # every node owned exactly once, by the part the owner array names
        lo = offsets[t]
        assert torch.equal(pg.owner(t), owner[lo : lo + g.num_nodes(t)])
    for rel in g.canonical_etypes:
        s, _, d = rel
        src, dst = g.find_edges(rel)
        seen = torch.cat([p.edge_ids[rel] for p in pg.parts])
        assert torch.equal(torch.sort(seen).values, torch.arange(g.num_edges(rel)))  # each edge once
        for p in pg.parts:
            mine = owner[dst + offsets[d]] == p.part_id
            assert torch.equal(p.edge_ids[rel], torch.nonzero(mine).flatten())
            lsrc, ldst = p.graph.find_edges(rel)  # local ids map back to the parent's edges
            assert torch.equal(p.node_ids[s][lsrc], src[mine]) and torch.equal(p.node_ids[d][ldst], dst[mine])
            assert bool((ldst < p.num_owned[d]).all())  # destinations are owned
            for key, value in g.edges[rel].data.items():
                assert torch.equal(p.graph.edges[rel].data[key], value[mine])
    for p in pg.parts:
        for t in g.ntypes:
            remote = set()
            for rel in g.canonical_etypes:
                if rel[0] != t:
                    continue
                src, dst = g.find_edges(rel)
                keep = (owner[dst + offsets[rel[2]]] == p.part_id) & (owner[src + offsets[t]] != p.part_id)
                remote |= set(src[keep].tolist())
            assert sorted(remote) == p.halo(t).tolist()
            assert torch.equal(p.node_feats[t]["feat"], g.nodes[t].data["feat"][p.owned(t)])
            assert torch.equal(p.to_local(t, p.node_ids[t]), torch.arange(p.node_counts[t]))
    src, dst = g.find_edges()
    assert pg.params["edge_cut"] == edge_cut(g, owner) == int((owner[src] != owner[dst]).sum())


@pytest.mark.parametrize("parts", [2, 3])
def test_random_edge_cut(mag, parts):
    pg = random_partition(mag, parts, seed=1)
    owner = random_owner(mag, parts, seed=1)
    counts = torch.bincount(owner, minlength=parts)
    assert int(counts.max() - counts.min()) <= 1
    _check_edge_cut(mag, pg, owner)
    assert {A, F} <= {t for p in pg.parts for t in p.boundary}  # unlike meta: every type is on the boundary


def test_edge_cut_of_awkward_heterograph():
    g = random_heterograph(seed=3)
    g.edges[("user", "likes", "item")].data["w"] = torch.arange(g.num_edges(("user", "likes", "item"))).float()
    g.ndata_all["feat"] = torch.randn(g.num_nodes(), 3)
    owner = torch.arange(g.num_nodes()) % 4
    pg = edge_cut_partition(g, owner, 4, "given")
    _check_edge_cut(g, pg, owner)
    with pytest.raises(ValueError, match="owner ids"):
        edge_cut_partition(g, owner, 3, "given")


def test_metis_edge_cut(mag):
    pytest.importorskip("pymetis")
    owner = metis_owner(mag, 2, seed=0)
    pg = metis_partition(mag, 2, seed=0)
    _check_edge_cut(mag, pg, owner)
    assert edge_cut(mag, owner) < 0.75 * edge_cut(mag, random_owner(mag, 2))
    counts = torch.bincount(owner, minlength=2)
    assert int(counts.max()) <= 1.05 * mag.num_nodes() / 2
    heavy = torch.ones(mag.num_nodes(), dtype=torch.int64)
    heavy[: mag.num_nodes(P)] = 20  # papers weigh 20: METIS balances weight, not nodes
    weighted = metis_owner(mag, 2, seed=0, node_weights=heavy)
    loads = torch.bincount(weighted, weights=heavy.double(), minlength=2)
    assert float(loads.max()) <= 1.05 * float(heavy.sum()) / 2
    with pytest.raises(ValueError, match="node_weights"):
        metis_owner(mag, 2, node_weights=torch.ones(3, dtype=torch.int64))


def test_metis_missing_gives_clear_import_error(mag, monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(ImportError, match="pip install"):
        metis_owner(mag, 2)


def test_typed_subgraph_rejects_edges_to_dropped_nodes(mag):
    with pytest.raises(ValueError, match="not among the kept nodes"):
        typed_subgraph(mag, [A, P], [WRITES], node_ids={A: torch.tensor([0, 1])})


# ----------------------------------------------------------------- on disk
def _same(a, b):
    assert (a.method, a.schema, a.params, a.num_parts) == (b.method, b.schema, b.params, b.num_parts)
    for p, q in zip(a.parts, b.parts):
        assert (p.part_id, p.relations, p.node_counts, p.num_owned, p.info) == (
            q.part_id,
            q.relations,
            q.node_counts,
            q.num_owned,
            q.info,
        )
        for rel in p.relations:
            assert all(torch.equal(x, y) for x, y in zip(p.graph.find_edges(rel), q.graph.find_edges(rel)))
            assert torch.equal(p.edge_ids[rel], q.edge_ids[rel])
            assert p.graph.edges[rel].data.keys() == q.graph.edges[rel].data.keys()
        for t in p.node_types:
            assert torch.equal(p.node_ids[t], q.node_ids[t])
            assert p.node_feats[t].keys() == q.node_feats[t].keys()
            assert all(torch.equal(v, q.node_feats[t][k]) for k, v in p.node_feats[t].items())
        assert p.boundary.keys() == q.boundary.keys()
        assert all(torch.equal(v, q.boundary[t]) for t, v in p.boundary.items())


def test_save_load_round_trip(mag, tmp_path):
    meta = meta_partition(mag, P, 3)
    save_partitions(meta, tmp_path / "meta")
    _same(meta, load_partitions(tmp_path / "meta"))
    cut = random_partition(mag, 2)
    save_partitions(cut, tmp_path / "cut")
    _same(cut, load_partitions(tmp_path / "cut"))
    manifest = json.loads((tmp_path / "meta" / MANIFEST).read_text())
    assert manifest["parts"][0]["relations"] == [list(r) for r in meta.parts[0].relations]
    assert {p["dir"] for p in manifest["parts"]} == {"part0", "part1", "part2"}


@pytest.fixture(scope="module")
def saved(mag, tmp_path_factory):
    out = tmp_path_factory.mktemp("saved") / "parts"
    save_partitions(meta_partition(mag, P, 2), out)
    return out


def _copy(saved, tmp_path):
    out = tmp_path / "parts"
    shutil.copytree(saved, out)
    return out


def _edit_manifest(out, fn):
    manifest = json.loads((out / MANIFEST).read_text())
    fn(manifest)
    (out / MANIFEST).write_text(json.dumps(manifest))


def _set_checksum(out, part, role):
    from gnnc.distributed.partition_io import _sha256

    def fix(m):
        m["parts"][part]["files"][role]["sha256"] = _sha256(out / f"part{part}" / FILES[role])

    _edit_manifest(out, fix)


def test_load_missing_pieces(saved, tmp_path):
    out = _copy(saved, tmp_path)
    with pytest.raises(FileNotFoundError, match="manifest"):
        load_partitions(tmp_path / "elsewhere")
    (out / "part0" / FILES["ids"]).unlink()
    with pytest.raises(FileNotFoundError, match=r"part0/ids\.npz"):
        load_partitions(out)
    out2 = _copy(saved, tmp_path / "b")
    shutil.rmtree(out2 / "part1")
    with pytest.raises(FileNotFoundError, match="part directory .*part1"):
        load_partitions(out2)


def test_load_checksum_mismatch(saved, tmp_path):
    out = _copy(saved, tmp_path)
    with open(out / "part1" / FILES["feats"], "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match=r"part1/feats\.npz: checksum mismatch"):
        load_partitions(out)


def test_load_schema_mismatch(saved, tmp_path):
    out = _copy(saved, tmp_path)
    shutil.copy(out / "part1" / FILES["graph"], out / "part0" / FILES["graph"])  # a consistent wrong file
    _set_checksum(out, 0, "graph")
    with pytest.raises(ValueError, match=r"part0/graph\.npz: schema mismatch"):
        load_partitions(out)
    out2 = _copy(saved, tmp_path / "b")

    def shrink_parent(m):
        m["schema"]["ntypes"] = [[t, 1] for t, _ in m["schema"]["ntypes"]]

    _edit_manifest(out2, shrink_parent)
    with pytest.raises(ValueError, match=r"part0/graph\.npz: node type .* does not fit the parent"):
        load_partitions(out2)


def test_load_bad_ids(saved, tmp_path):
    out = _copy(saved, tmp_path)
    path = out / "part0" / FILES["ids"]
    with np.load(path) as archive:
        arrays = dict(archive)
    arrays["node_ids_0"] = arrays["node_ids_0"] + 10**6
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    _set_checksum(out, 0, "ids")
    with pytest.raises(ValueError, match=r"part0/ids\.npz: entry 'node_ids_0' has ids outside"):
        load_partitions(out)


def test_load_partitions_written_in_another_type_order(saved, tmp_path):
    """Files written before gnnc followed DGL's type order list types in another order; the manifest names
    them, so they load by name into DGL's order."""
    out = _copy(saved, tmp_path)
    manifest = json.loads((out / MANIFEST).read_text())
    for key in ("ntypes", "relations"):
        manifest["schema"][key].reverse()
    for record in manifest["parts"]:
        path = out / record["dir"] / FILES["ids"]
        with np.load(path) as archive:
            arrays = dict(archive)
        for names, prefixes in ((record["node_types"], ("node_ids", "boundary")), (record["relations"], ("edge_ids",))):
            last = len(names) - 1
            arrays.update({f"{pre}_{last - i}": arrays[f"{pre}_{i}"] for pre in prefixes for i in range(last + 1)})
            names.reverse()
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    (out / MANIFEST).write_text(json.dumps(manifest))
    for part in range(len(manifest["parts"])):
        _set_checksum(out, part, "ids")
    assert manifest["parts"][0]["node_types"] != load_partitions(saved).parts[0].node_types
    _same(load_partitions(saved), load_partitions(out))


def test_load_wrong_format_or_version(saved, tmp_path):
    out = _copy(saved, tmp_path)
    _edit_manifest(out, lambda m: m.update(version=99))
    with pytest.raises(ValueError, match="manifest.json: partition format version 99"):
        load_partitions(out)
    _edit_manifest(out, lambda m: m.update(format="something-else", version=1))
    with pytest.raises(ValueError, match="manifest.json: not a gnnc partition manifest"):
        load_partitions(out)
    (out / MANIFEST).write_text("{ not json")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        load_partitions(out)


# ----------------------------------------------------------------------- CLI
def test_partition_command(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="gnnc")
    add_partition_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            "partition",
            "mag",
            "--scale",
            "0.001",
            "--method",
            "meta",
            "--parts",
            "2",
            "--add-reverse",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "boundary {'paper'" in text and "balance (max/mean)" in text
    pg = load_partitions(tmp_path / "out")
    assert pg.method == "meta" and [len(p.relations) for p in pg.parts] == [3, 5]
