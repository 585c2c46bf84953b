"""DGL's ``dgl.partition`` (gnnc.graph.partition): partitions with HALO nodes, reordering, METIS.

Expected ids and orders were printed by DGL 2.1 on the same graph.
"""

import pytest
import torch

import gnnc
from gnnc.graph import partition

SRC = [0, 1, 2, 3, 4, 5, 6, 7, 2, 5, 0, 7, 3, 1]
DST = [1, 2, 3, 4, 5, 6, 7, 0, 0, 1, 5, 3, 6, 6]
PARTS = torch.tensor([0, 1, 1, 0, 2, 2, 1, 0])


def _graph():
    return gnnc.graph((torch.tensor(SRC), torch.tensor(DST)), num_nodes=8)


def _summary(sub):
    src, dst = sub.edges()
    return (
        src.tolist(),
        dst.tolist(),
        {k: v.tolist() for k, v in sub.ndata.items()},
        {k: v.tolist() for k, v in sub.edata.items()},
    )


def test_partition_without_halo_keeps_inner_edges_only():
    subs, nids, eids = partition.partition_graph_with_halo(_graph(), PARTS, 0)
    assert nids is None and eids is None and list(subs) == [0, 1, 2]
    assert _summary(subs[1]) == (
        [0, 0],
        [1, 2],
        {"_ID": [1, 2, 6], "inner_node": [1, 1, 1], "part_id": [1, 1, 1]},
        {"_ID": [1, 13], "inner_edge": [1, 1]},
    )
    assert subs[0].ndata["inner_node"].dtype == torch.int32 and subs[0].edata["inner_edge"].dtype == torch.int8


def test_partition_with_two_hops_and_reshuffle_matches_dgl():
    subs, nids, eids = partition.partition_graph_with_halo(_graph(), PARTS, 2, reshuffle=True)
    assert nids.tolist() == [0, 3, 7, 1, 2, 6, 4, 5]
    assert eids.tolist() == [7, 8, 2, 11, 6, 0, 9, 1, 5, 12, 13, 3, 4, 10]
    assert _summary(subs[2]) == (
        [2, 0, 3, 5, 4, 4, 5, 1, 1],
        [0, 1, 1, 3, 3, 2, 2, 6, 7],
        {
            "_ID": [6, 7, 1, 0, 4, 2, 3, 5],
            "inner_node": [1, 1, 0, 0, 0, 0, 0, 0],
            "part_id": [2, 2, 0, 0, 1, 0, 1, 1],
            "orig_id": [4, 5, 3, 0, 2, 7, 1, 6],
        },
        {
            "_ID": [11, 12, 13, 0, 1, 2, 3, 6, 8],
            "inner_edge": [1, 1, 1, 0, 0, 0, 0, 0, 0],
            "orig_id": [3, 4, 10, 7, 8, 2, 11, 9, 5],
        },
    )


def test_reorder_nodes_renumbers_and_records_old_ids():
    out = partition.reorder_nodes(_graph(), [3, 1, 0, 2, 7, 6, 5, 4])
    assert out.edges()[0].tolist() == [3, 1, 0, 2, 7, 6, 5, 4, 0, 6, 3, 4, 2, 1]
    assert out.edges()[1].tolist() == [1, 0, 2, 7, 6, 5, 4, 3, 3, 1, 6, 2, 5, 5]
    assert out.ndata["orig_id"].tolist() == [2, 1, 3, 0, 7, 6, 5, 4]
    with pytest.raises(ValueError, match="permutation"):
        partition.reorder_nodes(_graph(), [0, 0, 1, 2, 3, 4, 5, 6])


def test_metis_assigns_every_node_and_refuses_int32():
    pytest.importorskip("pymetis")
    g = gnnc.graph((torch.randint(0, 200, (2000,)), torch.randint(0, 200, (2000,))), num_nodes=200)
    parts = partition.metis_partition_assignment(g, 4, balance_ntypes=torch.arange(200) % 3, balance_edges=True)
    assert parts.dtype == torch.int64 and sorted(parts.unique().tolist()) == [0, 1, 2, 3]
    subs = partition.metis_partition(g, 4, extra_cached_hops=1)
    assert sum(int(s.ndata["inner_node"].sum()) for s in subs.values()) == 200
    assert sum(int(s.edata["inner_edge"].sum()) for s in subs.values()) == 2000
    with pytest.raises(ValueError, match="int64"):
        partition.metis_partition_assignment(g.int(), 4)


def test_dgl_alias_resolves_partition_and_transforms():
    from gnnc.compat import dgl as alias

    alias.install()
    try:
        import dgl
        import dgl.partition

        assert dgl.partition.reorder_nodes is partition.reorder_nodes
        assert dgl.transforms.metis_partition is dgl.metis_partition is partition.metis_partition
        assert dgl.transforms.to_block is gnnc.to_block
    finally:
        alias.uninstall()
