"""DGL's graph API that its heterograph tests use (issue 40): adjacency tensors, ``adj``, the metagraph's
networkx reading, the bipartite constructors. Expected values were printed by DGL 2.1 for the same calls."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as ssp
import torch

import gnnc


def test_adj_tensors_match_dgl():
    g = gnnc.graph(([2, 0, 1, 0], [1, 2, 2, 0]))
    src, dst = g.adj_tensors("coo")
    assert src.tolist() == [2, 0, 1, 0] and dst.tolist() == [1, 2, 2, 0]
    indptr, indices, eids = g.adj_tensors("csr")
    assert (indptr.tolist(), indices.tolist(), eids.tolist()) == ([0, 2, 3, 4], [2, 0, 2, 1], [1, 3, 2, 0])
    indptr, indices, eids = g.adj_tensors("csc")
    assert (indptr.tolist(), indices.tolist(), eids.tolist()) == ([0, 1, 2, 4], [0, 2, 0, 1], [3, 0, 1, 2])


def test_adj_tensors_empty_edge_ids_mean_edge_id_order():
    """DGL returns no edge ids for the format a graph was built from: its documented 'ids are 0..E-1'."""
    g = gnnc.graph(("csr", ([0, 2, 3, 4], [1, 2, 2, 0], [])), idtype=torch.int32)
    indptr, indices, eids = g.adj_tensors("csr")
    assert (indptr.tolist(), indices.tolist(), eids.numel()) == ([0, 2, 3, 4], [1, 2, 2, 0], 0)
    assert indptr.dtype == eids.dtype == torch.int32
    assert g.adj_tensors("csc")[2].tolist() == [3, 0, 1, 2]


def test_adj_of_one_relation():
    hg = gnnc.heterograph(
        {("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1])}
    )
    a = hg.adj("plays")
    assert a.indices().tolist() == [[0, 1, 2, 1], [0, 0, 1, 1]] and a.val.tolist() == [1.0] * 4
    assert a.shape == (3, 2)
    hg.edges["plays"].data["w"] = torch.tensor([1, 2, 3, 4])
    assert hg.adj("plays", "w").to_dense().tolist() == [[1, 0], [2, 4], [0, 3]]
    assert hg.adj_tensors("csr", "plays")[2].tolist() == [0, 1, 3, 2]
    with pytest.raises(ValueError, match="etype="):
        hg.adj_tensors("csr")


def test_incidence_matrix_is_inc():
    g = gnnc.graph(([0, 0, 2], [1, 2, 2]))
    assert torch.equal(g.incidence_matrix("both").to_dense(), g.inc("both").to_dense())


def test_metagraph_reads_as_networkx():
    hg = gnnc.heterograph({("user", "follows", "user"): ([0], [1]), ("user", "plays", "game"): ([0], [0])})
    mg = hg.metagraph()
    assert set(mg.nodes) == {"user", "game"}
    assert set(mg.edges(keys=True)) == {("user", "user", "follows"), ("user", "game", "plays")}
    assert mg.edges(keys=True)[("user", "game", "plays")] == {}
    assert sorted(mg.edges()) == [("user", "game"), ("user", "user")]


def _bipartite_nx():
    nx_g = nx.DiGraph()
    nx_g.add_nodes_from([7, 3], bipartite=0, f=np.zeros(2))
    nx_g.add_nodes_from([2, 9, 5], bipartite=1, f=np.ones(3))
    nx_g.add_edge(7, 2, w=np.ones(1) * 5, eid=1)
    nx_g.add_edge(3, 5, w=np.ones(1) * 6, eid=0)
    nx_g.add_edge(3, 9, w=np.ones(1) * 7, eid=2)
    return nx_g


def test_bipartite_from_networkx_matches_dgl():
    g = gnnc.graph.bipartite_from_networkx(_bipartite_nx(), "u", "e", "v", u_attrs=["f"], v_attrs=["f"], e_attrs=["w"])
    assert (g.ntypes, g.num_nodes("u"), g.num_nodes("v")) == (["u", "v"], 2, 3)
    assert [t.tolist() for t in g.edges()] == [[1, 0, 0], [0, 1, 2]]
    assert g.edata["w"].flatten().tolist() == [5.0, 6.0, 7.0]
    assert g.nodes["u"].data["f"].shape == (2, 2) and g.nodes["v"].data["f"].shape == (3, 3)
    g = gnnc.graph.bipartite_from_networkx(_bipartite_nx(), "u", "e", "v", e_attrs=["w"], edge_id_attr_name="eid")
    assert [t.tolist() for t in g.edges()] == [[0, 1, 0], [1, 0, 2]]
    assert g.edata["w"].flatten().tolist() == [6.0, 5.0, 7.0]


def test_bipartite_from_networkx_refuses_an_edge_against_the_sides():
    nx_g = _bipartite_nx()
    nx_g.add_edge(2, 7)
    with pytest.raises(ValueError, match="bipartite=0 node to a bipartite=1"):
        gnnc.graph.bipartite_from_networkx(nx_g, "u", "e", "v")


def test_bipartite_from_scipy_matches_dgl():
    m = ssp.csr_matrix((np.array([0.5, 0.25, 2.0]), (np.array([2, 0, 2]), np.array([1, 3, 0]))), shape=(3, 4))
    g = gnnc.graph.bipartite_from_scipy(m, "u", "e", "v", eweight_name="w", idtype=torch.int32)
    assert (g.num_nodes("u"), g.num_nodes("v")) == (3, 4)
    assert [t.tolist() for t in g.edges()] == [[0, 2, 2], [3, 0, 1]] and g.idtype == torch.int32
    assert g.edata["w"].tolist() == [0.25, 2.0, 0.5]


def test_edge_ids_in_one_element_arrays():
    """DGL's tests hold networkx edge ids as ``np.array([i])``; DGL reads them as the id i."""
    nx_g = _bipartite_nx()
    for i, (_, _, data) in enumerate(nx_g.edges(data=True)):
        data["eid"] = np.array([(i + 1) % 3])
    g = gnnc.graph.bipartite_from_networkx(nx_g, "u", "e", "v", edge_id_attr_name="eid")
    assert [t.tolist() for t in g.edges()] == [[0, 1, 0], [2, 0, 1]]
