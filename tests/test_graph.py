"""Graph storage: id space, internal order, CSR caches, features, validation."""

import pytest
import torch

import gnnc
from tests.graphs import random_heterograph, random_homograph


def test_homogeneous_basics():
    g = gnnc.graph(([2, 0, 1, 2], [1, 2, 2, 0]), num_nodes=4)
    assert g.is_homogeneous and g.ntypes == ["_N"] and g.canonical_etypes == [("_N", "_E", "_N")]
    assert (g.num_nodes(), g.num_edges()) == (4, 4)
    src, dst = g.find_edges()
    assert src.tolist() == [2, 0, 1, 2] and dst.tolist() == [1, 2, 2, 0]
    assert g.in_degrees().tolist() == [1, 1, 2, 0]
    assert g.out_degrees().tolist() == [1, 1, 2, 0]
    assert src.dtype == torch.int64
    assert gnnc.graph.Graph is gnnc.Graph


def test_num_nodes_inferred_and_isolated_nodes():
    assert gnnc.graph(([0, 5], [1, 1])).num_nodes() == 6
    assert gnnc.graph(([], []), num_nodes=3).num_edges() == 0


def test_internal_order_sorted_by_relation_then_destination():
    g = random_heterograph(seed=3)
    idx = g.index
    key = idx.edge_rel * idx.num_nodes + idx.dst
    assert bool((key[1:] >= key[:-1]).all())
    # relation blocks have the same bounds in user order and internal order
    assert torch.equal(torch.sort(g.edge_type_ids()).values, idx.edge_rel)


def test_relation_ids_kept_as_int32_and_given_out_as_int64():
    """The index keeps every edge's relation in 4 bytes; edge_type_ids (user order) and the R-GCN normaliser
    (a key of relation x nodes + destination) work in int64."""
    g = random_heterograph(1)
    assert g.index.edge_rel.dtype == torch.int32
    ids = g.edge_type_ids()
    assert ids.dtype == torch.int64
    src, dst = g.edges()
    offsets = 0
    for r, rel in enumerate(g.canonical_etypes):
        assert bool((ids[offsets : offsets + g.num_edges(rel)] == r).all())
        offsets += g.num_edges(rel)
    key = ids * g.num_nodes() + dst
    want = torch.bincount(key)[key]
    assert torch.equal(g.edge_relation_in_degrees(), want)


def test_node_types_in_user_order_and_global_ids():
    g = gnnc.heterograph({("b", "r", "a"): ([0, 1], [2, 0])}, num_nodes={"a": 3, "b": 2})
    assert g.ntypes == ["a", "b"]
    assert g.node_type_ids().tolist() == [0, 0, 0, 1, 1]
    src, dst = g.find_edges()
    assert src.tolist() == [3, 4] and dst.tolist() == [2, 0]
    assert [t.tolist() for t in g.find_edges("r")] == [[0, 1], [2, 0]]


def test_csr_and_permutations_consistent():
    g = random_heterograph(seed=1)
    idx = g.index
    indptr, eids = idx.in_csr
    assert torch.equal(indptr.diff(), g.in_degrees())
    for v in range(g.num_nodes()):
        assert bool((idx.dst[eids[indptr[v] : indptr[v + 1]]] == v).all())
    indptr, eids = idx.out_csr
    assert torch.equal(indptr.diff(), g.out_degrees())
    assert bool((idx.src[eids] == torch.repeat_interleave(torch.arange(g.num_nodes()), indptr.diff())).all())
    # user <-> internal permutations are inverse of each other
    src_user, _ = g.find_edges()
    assert torch.equal(idx.from_user_order(src_user), idx.src)
    assert torch.equal(idx.to_user_order(idx.src), src_user)


def test_edata_stays_in_user_order_through_message_passing():
    g = gnnc.graph(([3, 0, 2, 1], [0, 3, 1, 2]), num_nodes=4)
    g.edata["w"] = torch.tensor([10.0, 20.0, 30.0, 40.0])
    assert g.edata["w"].tolist() == [10.0, 20.0, 30.0, 40.0]
    g.apply_edges(lambda e: {"s": e.data["w"] + 0})
    assert g.edata["s"].tolist() == [10.0, 20.0, 30.0, 40.0]
    g.ndata["x"] = torch.arange(4.0)
    g.apply_edges(lambda e: {"src_of_edge": e.src["x"]})
    assert g.edata["src_of_edge"].tolist() == [3.0, 0.0, 2.0, 1.0]


def test_per_type_features_of_different_widths_and_featureless_types():
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.randn(9, 4)
    g.nodes["item"].data["x"] = torch.randn(7, 6)
    assert g.nodes["user"].data["x"].shape == (9, 4)
    assert "x" not in g.nodes["tag"].data
    assert "x" not in g.ndata_all and list(g.ndata_all) == []
    with pytest.raises(KeyError, match="missing for \\['tag'\\]"):
        g.ndata_all["x"]
    g.nodes["tag"].data["x"] = torch.randn(1, 6)
    with pytest.raises(ValueError, match="different shape per type"):
        g.ndata_all["x"]
    g.nodes["user"].data["x"] = torch.randn(9, 6)
    assert "x" in g.ndata_all and g.ndata_all["x"].shape == (17, 6)
    assert torch.equal(g.ndata_all["x"][:7], g.nodes["item"].data["x"])  # types in DGL's order: item, tag, user


def test_whole_features_sliced_per_type_and_per_relation():
    g = random_heterograph()
    g.ndata_all["h"] = torch.arange(17.0)
    assert g.nodes["item"].data["h"].tolist() == list(range(7))  # types in DGL's order: item, tag, user
    g.edata_all["w"] = torch.arange(float(g.num_edges()))
    lo = g.index.rel_offsets[g.etype_id("follows")]
    assert g.edges["follows"].data["w"][0].item() == lo
    g.edges["likes"].data["w"] = torch.zeros(g.num_edges("likes"))
    likes = g.index.rel_offsets[g.etype_id("likes")]
    assert g.edata_all["w"][likes : likes + g.num_edges("likes")].abs().sum() == 0
    assert g.edata_all["w"][lo].item() == lo


def test_type_parameters_validated():
    g = random_heterograph()
    g.ntype_data["W"] = torch.randn(3, 2, 2)
    g.etype_data["W"] = torch.randn(5, 2)
    with pytest.raises(ValueError, match="3 node types"):
        g.ntype_data["bad"] = torch.randn(2, 2)
    with pytest.raises(ValueError, match="5 edge types"):
        g.etype_data["bad"] = torch.randn(4)


def test_local_scope_discards_assignments_keeps_inplace():
    g = random_homograph()
    g.ndata["h"] = torch.zeros(g.num_nodes())
    with g.local_scope():
        g.ndata["h"] = torch.ones(g.num_nodes())
        g.ndata["tmp"] = torch.ones(g.num_nodes())
        g.ntype_data["p"] = torch.ones(1)
    assert g.ndata["h"].sum() == 0 and "tmp" not in g.ndata and "p" not in g.ntype_data
    with g.local_scope():
        g.ndata["h"][0] = 5.0
    assert g.ndata["h"][0] == 5.0


def test_reverse_keeps_edge_ids_and_flips_types():
    g = random_heterograph(seed=2)
    g.edata_all["w"] = torch.arange(float(g.num_edges()))
    r = g.reverse(copy_edata=True)  # DGL: edge features only when asked
    assert ("item", "likes", "user") in r.canonical_etypes
    s, d = g.find_edges("likes")
    rs, rd = r.find_edges("likes")
    assert torch.equal(s, rd) and torch.equal(d, rs)
    assert torch.equal(r.edata_all["w"], g.edata_all["w"])
    assert torch.equal(r.in_degrees(), g.out_degrees())


def test_add_self_loop():
    g = gnnc.graph(([0, 1], [1, 2]), num_nodes=3)
    g.edata["w"] = torch.tensor([5.0, 6.0])
    h = g.add_self_loop()
    assert h.num_edges() == 5
    s, d = h.find_edges()
    assert s.tolist() == [0, 1, 0, 1, 2] and d.tolist() == [1, 2, 0, 1, 2]
    assert h.edata["w"].tolist() == [5.0, 6.0, 1.0, 1.0, 1.0]
    hg = random_heterograph()
    with pytest.raises(ValueError, match="etype="):
        hg.add_self_loop()
    with pytest.raises(ValueError, match="two different node types"):
        hg.add_self_loop("likes")
    loops = hg.add_self_loop("follows")
    assert loops.num_edges("follows") == hg.num_edges("follows") + 9


def test_remove_self_loop_keeps_the_other_edges_in_order_with_their_features():
    g = gnnc.graph(([0, 1, 1, 2, 2], [0, 2, 1, 0, 1]), num_nodes=3)
    g.edata["w"] = torch.arange(5.0)
    g.ndata["h"] = torch.ones(3, 2)
    h = g.remove_self_loop()
    s, d = h.find_edges()
    assert s.tolist() == [1, 2, 2] and d.tolist() == [2, 0, 1]
    assert h.edata["w"].tolist() == [1.0, 3.0, 4.0] and torch.equal(h.ndata["h"], g.ndata["h"])
    assert torch.equal(h.add_self_loop().remove_self_loop().find_edges()[0], s)  # DGL's preprocessing pair
    hg = random_heterograph()
    with pytest.raises(ValueError, match="etype="):
        hg.remove_self_loop()
    with pytest.raises(ValueError, match="two different node types"):
        hg.remove_self_loop("likes")
    fs, fd = hg.find_edges("follows")
    kept = hg.remove_self_loop("follows")
    assert kept.num_edges("follows") == int((fs != fd).sum()) and kept.num_edges("likes") == hg.num_edges("likes")


def test_in_and_out_edges_of_chosen_nodes():
    g = gnnc.graph(([0, 1, 1, 2, 2], [0, 2, 1, 0, 1]), num_nodes=3)
    src, dst = g.in_edges(1)
    assert src.tolist() == [1, 2] and dst.tolist() == [1, 1]
    assert g.in_edges(torch.tensor([0]), form="eid").tolist() == [0, 3]
    s, d, e = g.out_edges([2], form="all")
    assert s.tolist() == [2, 2] and d.tolist() == [0, 1] and e.tolist() == [3, 4]
    hg = random_heterograph()
    s, d, e = hg.in_edges(0, form="all", etype="follows")
    assert (d == 0).all() and torch.equal(hg.find_edges("follows")[0][e], s)
    with pytest.raises(ValueError, match="form must be one of"):
        g.in_edges(0, form="csr")


def test_metagraph_lists_types_and_counts():
    g = random_heterograph()
    mg = g.metagraph()
    assert dict(mg.ntypes) == {"user": 9, "item": 7, "tag": 1}
    assert dict(mg.relations)[("tag", "empty", "user")] == 0
    assert "user -[likes]-> item" in str(mg)


def test_to_device_copies_structure_and_features():
    g = random_heterograph()
    g.ndata_all["h"] = torch.randn(17, 2)
    h = g.to("cpu")
    assert torch.equal(h.ndata_all["h"], g.ndata_all["h"])
    assert h.index.num_edges == g.index.num_edges


# --------------------------------------------------------------- bad inputs
def test_out_of_range_id_names_relation_and_id():
    with pytest.raises(ValueError, match=r"relation \('a', 'r', 'b'\) destination.*node id 7"):
        gnnc.heterograph({("a", "r", "b"): ([0], [7])}, num_nodes={"a": 2, "b": 3})
    with pytest.raises(ValueError, match="node id -1"):
        gnnc.graph(([0, -1], [1, 1]))


def test_length_mismatch_names_relation():
    with pytest.raises(ValueError, match=r"\('_N', '_E', '_N'\): 2 source ids but 1 destination ids"):
        gnnc.graph(([0, 1], [1]))


def test_unknown_node_type_in_relation():
    with pytest.raises(KeyError, match="node type 'c'"):
        gnnc.heterograph({("a", "r", "c"): ([0], [0])}, num_nodes={"a": 1, "b": 1})


def test_unknown_type_and_relation_lookups():
    g = random_heterograph()
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        g.nodes["nope"]
    with pytest.raises(KeyError, match="unknown relation 'nope'"):
        g.edges["nope"]
    with pytest.raises(KeyError, match="unknown relation"):
        g.num_edges(("user", "likes", "user"))


def test_ambiguous_relation_name():
    g = gnnc.heterograph({("a", "r", "b"): ([0], [0]), ("b", "r", "a"): ([0], [0])})
    with pytest.raises(KeyError, match="ambiguous"):
        g.etype_id("r")
    assert g.etype_id(("b", "r", "a")) == 1


def test_feature_row_mismatch_names_key():
    g = random_homograph(num_nodes=12)
    with pytest.raises(ValueError, match="'h' has 5 rows but the graph has 12 nodes"):
        g.ndata["h"] = torch.zeros(5)
    with pytest.raises(ValueError, match="'w' has 3 rows"):
        g.edata["w"] = torch.zeros(3)
    hg = random_heterograph()
    with pytest.raises(ValueError, match="'x' for type 'item' has 2 rows but the type has 7"):
        hg.nodes["item"].data["x"] = torch.zeros(2)


def test_missing_feature_names_key():
    g = random_homograph()
    with pytest.raises(KeyError, match="no node feature 'h'"):
        g.ndata["h"]


def test_non_integer_ids_rejected():
    with pytest.raises(ValueError, match="integer node ids"):
        gnnc.graph(([0.5], [1.0]))
    with pytest.raises(ValueError, match="1-D"):
        gnnc.graph((torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long)))


def test_edge_relation_in_degrees_counts_each_edges_relation_in_edges_of_its_destination():
    """Per relation: unsorted edges with duplicates, self loops, an empty relation; user edge order."""
    g = random_heterograph(seed=4)
    want = []
    for rel in g.canonical_etypes:
        _, dst = g.find_edges(rel)
        want.append(g.in_degrees(etype=rel).index_select(0, dst))
    assert torch.equal(g.edge_relation_in_degrees(), torch.cat(want))
    empty = gnnc.graph(([], []), num_nodes=3)
    assert empty.edge_relation_in_degrees().shape == (0,)
