"""DGL's ``dgl.dataloading`` call shape (gnnc.data.dataloading): ``NeighborSampler(fanouts)`` and ``DataLoader``
give DGL's ``(input_nodes, output_nodes, blocks)`` with the parent ids DGL stores on each block."""

import pytest
import torch

import gnnc
from gnnc.data import dataloading

NID = EID = "_ID"


def _ring(n=30):
    src = torch.arange(n)
    return gnnc.graph((torch.cat([src, src]), torch.cat([(src + 1) % n, (src + 7) % n])), idtype=torch.int32)


def test_the_data_loader_batches_seeds_into_dgls_triples():
    g = _ring()
    torch.manual_seed(0)
    seeds = torch.randperm(30, dtype=torch.int32)[:10]
    loader = dataloading.DataLoader(g, seeds, dataloading.NeighborSampler([-1, 2]), batch_size=4, shuffle=True)
    assert len(loader) == 3
    seen = []
    for input_nodes, output_nodes, blocks in loader:
        assert len(blocks) == 2 and input_nodes.dtype == torch.int32
        assert torch.equal(blocks[0].srcdata[NID], input_nodes)
        assert torch.equal(blocks[-1].dstdata[NID], output_nodes)
        assert blocks[0].num_dst_nodes() == blocks[1].num_src_nodes()
        for block in blocks:  # every block edge is the parent edge it names
            src, dst = block.edges()
            parent_src, parent_dst = g.find_edges(block.edata[EID].long())
            assert torch.equal(block.srcdata[NID][src.long()].long(), parent_src.long())
            assert torch.equal(block.dstdata[NID][dst.long()].long(), parent_dst.long())
        assert bool((blocks[1].in_degrees() == 2).all())  # -1 on the input layer, 2 next to the seeds
        seen += output_nodes.tolist()
    assert sorted(seen) == sorted(seeds.tolist())


def test_the_sampler_takes_seeds_by_type_on_a_heterograph():
    g = gnnc.heterograph(
        {("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]), ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1])}
    )
    input_nodes, output_nodes, blocks = dataloading.MultiLayerFullNeighborSampler(2).sample(g, {"game": [1, 0]})
    assert sorted(input_nodes["user"].tolist()) == [0, 1, 2] and input_nodes["game"].tolist() == [1, 0]
    assert blocks[-1].dstdata[NID]["game"].tolist() == [1, 0] and blocks[-1].num_dst_nodes("user") == 0
    assert sorted(blocks[-1].edata[EID][("user", "plays", "game")].tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="dict by type"):
        dataloading.NeighborSampler([1]).sample(g, torch.tensor([0]))


def test_options_that_change_the_draw_are_refused():
    with pytest.raises(NotImplementedError, match="prob"):
        dataloading.NeighborSampler([2], prob="p")
    with pytest.raises(TypeError, match="collate_fn"):
        dataloading.DataLoader(_ring(), torch.arange(3), dataloading.NeighborSampler([2]), collate_fn=list)
