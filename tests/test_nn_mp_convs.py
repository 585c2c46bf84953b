"""``gnnc.nn``'s message-passing convolutions beyond the first set (PNAConv, EGATConv, DotGatConv, EdgeGATConv,
...) against DGL 2.1: parameter names and shapes as DGL's state dicts hold them, and DGL's numbers, eagerly
and compiled.

``EXPECTED`` was recorded by running ``cases`` (the section between the markers, which imports nothing of
gnnc) with DGL 2.1 itself (``G`` ``dgl``, ``nn`` ``dgl.nn.pytorch``), parameters filled and figures taken by
``test_nn_dgl_names``' ``fill`` and ``figures``.
"""
import warnings

import pytest
import torch

import gnnc
import gnnc.nn
from gnnc.runtime.compiled import recording

from .test_nn_dgl_names import figures, fill


# --- cases: DGL-agnostic (run by DGL 2.1 to record EXPECTED) ---
def cases(G, nn):
    """name -> (module, graph, positional inputs, keyword inputs); ``G`` is gnnc or dgl, ``nn`` its layers."""
    F = torch.nn.functional

    def x(rows, width=4, shift=0.0):
        return torch.arange(rows * width, dtype=torch.float64).add(shift).sin().view(rows, width)

    # 6 nodes, each with an in-edge; a multi-edge 1->1 self loop
    g = G.graph((torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 1, 1]), torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 1, 1])))
    # node 5 without in-edges; in-degrees 1, 3, 1, 2, 2, 0
    sparse = G.graph((torch.tensor([0, 1, 2, 3, 4, 0, 2, 1, 1]), torch.tensor([1, 2, 3, 4, 0, 3, 4, 1, 1])),
                     num_nodes=6)
    b = G.heterograph({("u", "r", "v"): (torch.tensor([0, 1, 2, 3, 3, 0]), torch.tensor([0, 0, 1, 2, 1, 2]))},
                      {"u": 4, "v": 3})
    block = G.to_block(G.in_subgraph(g, torch.tensor([0, 1, 2])), torch.tensor([0, 1, 2]))
    batch = G.batch([sparse, G.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))])
    weight = torch.tensor([0.5, 1.5, 1.0, 2.0, 0.25, 1.0, 3.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    aggregators = {"first": ["mean", "max", "sum"], "spread": ["min", "std", "var"],
                   "moments": ["moment3", "moment4", "moment5"]}
    scalers = {"first": ["identity"], "spread": ["identity", "amplification", "attenuation"],
               "moments": ["amplification", "attenuation"]}
    out = {f"pnaconv-{name}": (nn.PNAConv(4, 4, aggs, scalers[name], 2.5, num_towers=2, edge_feat_size=3), sparse,
                               (x(6),), {"edge_feat": x(9, 3, 1)})
           for name, aggs in aggregators.items()}
    out.update({
        "pnaconv-batch": (nn.PNAConv(4, 2, ["mean", "std"], ["identity", "amplification"], 1.5), batch, (x(9),), {}),
        "egatconv": (nn.EGATConv(4, 3, 2, 3, 2), g, (x(6), x(10, 3, 2)), {"get_attention": True}),
        "egatconv-edge-weight": (nn.EGATConv(4, 3, 2, 1, 3), g, (x(6), x(10, 3, 2)), {"edge_weight": weight}),
        "egatconv-bipartite": (nn.EGATConv((4, 3), 2, 3, 2, 2), b, ((x(4), x(3, 3, 1)), x(6, 2, 2)), {}),
        "dotgatconv": (nn.DotGatConv(4, 3, 2), g, (x(6),), {"get_attention": True}),
        "dotgatconv-bipartite": (nn.DotGatConv((4, 3), 2, 2), b, ((x(4), x(3, 3, 1)),), {}),
        "dotgatconv-block": (nn.DotGatConv(4, 2, 2), block, (x(block.num_src_nodes()),), {}),
        "edgegatconv": (nn.EdgeGATConv(4, 3, 2, 2, activation=F.elu), g, (x(6), x(10, 3, 2)),
                        {"get_attention": True}),
        "edgegatconv-bipartite": (nn.EdgeGATConv((4, 3), 2, 3, 2), b, ((x(4), x(3, 3, 1)), x(6, 2, 2)), {}),
        "edgegatconv-block": (nn.EdgeGATConv(4, 3, 2, 1, residual=False), block,
                              (x(block.num_src_nodes()), x(block.num_edges(), 3, 2)), {}),
    })
    return out
# --- end of cases ---


# recorded with DGL 2.1.0 (torch 2.2.1, float64): name -> (parameter shapes by name, figures)
EXPECTED = {
    "dotgatconv": ({"fc.weight": (6, 4)},
        [12.202030566613846, 7.760339627926902, 17.2947523858785]),
    "dotgatconv-bipartite": ({"fc_dst.weight": (4, 3), "fc_src.weight": (4, 4)},
        [0.09300731744015356, -0.4389869459818053, 2.1562719314556027]),
    "dotgatconv-block": ({"fc.weight": (4, 4)},
        [-0.03552364527331453, 0.9104824496617188, 3.0869785379930827]),
    "edgegatconv": ({"attn_edge": (1, 2, 2), "attn_l": (1, 2, 2), "attn_r": (1, 2, 2), "bias": (4,), "fc.weight": (4, 4), "fc_edge.weight": (4, 3), "res_fc.weight": (4, 4)},
        [18.98635030642335, 3.7417935682355505, 27.418387726784246]),
    "edgegatconv-bipartite": ({"attn_edge": (1, 2, 3), "attn_l": (1, 2, 3), "attn_r": (1, 2, 3), "bias": (6,), "fc_dst.weight": (6, 3), "fc_edge.weight": (6, 2), "fc_src.weight": (6, 4), "res_fc.weight": (6, 3)},
        [0.2477725296252602, -1.2718964799930494, 17.60625256011941]),
    "edgegatconv-block": ({"attn_edge": (1, 1, 2), "attn_l": (1, 1, 2), "attn_r": (1, 1, 2), "bias": (2,), "fc.weight": (2, 4), "fc_edge.weight": (2, 3)},
        [1.147964775710317, 1.3568294647876882, 2.106125913467882]),
    "egatconv": ({"attn": (1, 2, 3), "bias": (6,), "fc_fij.weight": (6, 3), "fc_ni.weight": (6, 4), "fc_nj.weight": (6, 4), "fc_node_src.weight": (4, 4)},
        [21.924815573800124, 8.441491254354418, 21.55517727481009]),
    "egatconv-bipartite": ({"attn": (1, 2, 2), "bias": (4,), "fc_fij.weight": (4, 2), "fc_ni.weight": (4, 4), "fc_nj.weight": (4, 3), "fc_node_src.weight": (6, 4)},
        [8.43955396664158, 2.8627390009523204, 11.357375362576331]),
    "egatconv-edge-weight": ({"attn": (1, 3, 1), "bias": (3,), "fc_fij.weight": (3, 3), "fc_ni.weight": (3, 4), "fc_nj.weight": (3, 4), "fc_node_src.weight": (6, 4)},
        [11.159496248581322, 8.452840881591749, 42.201403490809675]),
    "pnaconv-batch": ({"mixing_layer.0.bias": (2,), "mixing_layer.0.weight": (2, 2), "towers.0.M.bias": (4,), "towers.0.M.weight": (4, 8), "towers.0.U.bias": (2,), "towers.0.U.weight": (2, 20), "towers.0.batchnorm.bias": (2,), "towers.0.batchnorm.num_batches_tracked": (), "towers.0.batchnorm.running_mean": (2,), "towers.0.batchnorm.running_var": (2,), "towers.0.batchnorm.weight": (2,)},
        [10.836952776013774, -0.01892659932264007, 7.2169775339408275]),
    "pnaconv-first": ({"mixing_layer.0.bias": (4,), "mixing_layer.0.weight": (4, 4), "towers.0.M.bias": (2,), "towers.0.M.weight": (2, 7), "towers.0.U.bias": (2,), "towers.0.U.weight": (2, 8), "towers.0.batchnorm.bias": (2,), "towers.0.batchnorm.num_batches_tracked": (), "towers.0.batchnorm.running_mean": (2,), "towers.0.batchnorm.running_var": (2,), "towers.0.batchnorm.weight": (2,), "towers.1.M.bias": (2,), "towers.1.M.weight": (2, 7), "towers.1.U.bias": (2,), "towers.1.U.weight": (2, 8), "towers.1.batchnorm.bias": (2,), "towers.1.batchnorm.num_batches_tracked": (), "towers.1.batchnorm.running_mean": (2,), "towers.1.batchnorm.running_var": (2,), "towers.1.batchnorm.weight": (2,)},
        [10.216548463784733, -1.365428039215843, 18.79202750852842]),
    "pnaconv-moments": ({"mixing_layer.0.bias": (4,), "mixing_layer.0.weight": (4, 4), "towers.0.M.bias": (2,), "towers.0.M.weight": (2, 7), "towers.0.U.bias": (2,), "towers.0.U.weight": (2, 14), "towers.0.batchnorm.bias": (2,), "towers.0.batchnorm.num_batches_tracked": (), "towers.0.batchnorm.running_mean": (2,), "towers.0.batchnorm.running_var": (2,), "towers.0.batchnorm.weight": (2,), "towers.1.M.bias": (2,), "towers.1.M.weight": (2, 7), "towers.1.U.bias": (2,), "towers.1.U.weight": (2, 14), "towers.1.batchnorm.bias": (2,), "towers.1.batchnorm.num_batches_tracked": (), "towers.1.batchnorm.running_mean": (2,), "towers.1.batchnorm.running_var": (2,), "towers.1.batchnorm.weight": (2,)},
        [11.73384644659051, -0.8063468718551428, 20.99775920009524]),
    "pnaconv-spread": ({"mixing_layer.0.bias": (4,), "mixing_layer.0.weight": (4, 4), "towers.0.M.bias": (2,), "towers.0.M.weight": (2, 7), "towers.0.U.bias": (2,), "towers.0.U.weight": (2, 20), "towers.0.batchnorm.bias": (2,), "towers.0.batchnorm.num_batches_tracked": (), "towers.0.batchnorm.running_mean": (2,), "towers.0.batchnorm.running_var": (2,), "towers.0.batchnorm.weight": (2,), "towers.1.M.bias": (2,), "towers.1.M.weight": (2, 7), "towers.1.U.bias": (2,), "towers.1.U.weight": (2, 20), "towers.1.batchnorm.bias": (2,), "towers.1.batchnorm.num_batches_tracked": (), "towers.1.batchnorm.running_mean": (2,), "towers.1.batchnorm.running_var": (2,), "towers.1.batchnorm.weight": (2,)},
        [14.524658914757405, -1.1046333540235116, 25.260445133208542]),
}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_matches_dgl(name, compiled):
    """DGL's parameter names and numbers; compiled, a plan runs (no fallback)."""
    module, g, args, kwargs = cases(gnnc, gnnc.nn)[name]
    module = module.double()
    shapes, expected = EXPECTED[name]
    with torch.no_grad():
        assert fill(module) == shapes
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = (gnnc.compile(module) if compiled else module)(g, *args, **kwargs)
    assert bool(plans) == compiled
    assert figures(out) == pytest.approx(expected, rel=1e-9, abs=1e-12)
