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
from gnnc.compiler.driver import recording

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
    sparse = G.graph(
        (torch.tensor([0, 1, 2, 3, 4, 0, 2, 1, 1]), torch.tensor([1, 2, 3, 4, 0, 3, 4, 1, 1])), num_nodes=6
    )
    b = G.heterograph(
        {("u", "r", "v"): (torch.tensor([0, 1, 2, 3, 3, 0]), torch.tensor([0, 0, 1, 2, 1, 2]))}, {"u": 4, "v": 3}
    )
    block = G.to_block(G.in_subgraph(g, torch.tensor([0, 1, 2])), torch.tensor([0, 1, 2]))
    eig = G.graph((torch.tensor([0, 1, 2, 3, 4, 5, 0, 2]), torch.tensor([1, 2, 3, 4, 5, 0, 3, 5])))
    eig.ndata["eig"] = x(6, 2, 7)  # DGL's DGN messages carry it even without directional aggregators
    batch = G.batch([sparse, G.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))])
    weight = torch.tensor([0.5, 1.5, 1.0, 2.0, 0.25, 1.0, 3.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    aggregators = {
        "first": ["mean", "max", "sum"],
        "spread": ["min", "std", "var"],
        "moments": ["moment3", "moment4", "moment5"],
    }
    scalers = {
        "first": ["identity"],
        "spread": ["identity", "amplification", "attenuation"],
        "moments": ["amplification", "attenuation"],
    }
    out = {
        f"pnaconv-{name}": (
            nn.PNAConv(4, 4, aggs, scalers[name], 2.5, num_towers=2, edge_feat_size=3),
            sparse,
            (x(6),),
            {"edge_feat": x(9, 3, 1)},
        )
        for name, aggs in aggregators.items()
    }
    out.update(
        {
            "pnaconv-batch": (
                nn.PNAConv(4, 2, ["mean", "std"], ["identity", "amplification"], 1.5),
                batch,
                (x(9),),
                {},
            ),
            "dgnconv": (
                nn.DGNConv(
                    4,
                    4,
                    ["dir1-av", "dir2-dx", "mean", "max"],
                    ["identity", "amplification"],
                    2.0,
                    num_towers=2,
                    edge_feat_size=3,
                ),
                sparse,
                (x(6),),
                {"edge_feat": x(9, 3, 1), "eig_vec": x(6, 2, 5)},
            ),
            "dgnconv-no-direction": (nn.DGNConv(4, 2, ["sum", "std"], ["attenuation"], 1.5), eig, (x(6),), {}),
            "egatconv": (nn.EGATConv(4, 3, 2, 3, 2), g, (x(6), x(10, 3, 2)), {"get_attention": True}),
            "egatconv-edge-weight": (nn.EGATConv(4, 3, 2, 1, 3), g, (x(6), x(10, 3, 2)), {"edge_weight": weight}),
            "egatconv-bipartite": (nn.EGATConv((4, 3), 2, 3, 2, 2), b, ((x(4), x(3, 3, 1)), x(6, 2, 2)), {}),
            "dotgatconv": (nn.DotGatConv(4, 3, 2), g, (x(6),), {"get_attention": True}),
            "dotgatconv-bipartite": (nn.DotGatConv((4, 3), 2, 2), b, ((x(4), x(3, 3, 1)),), {}),
            "dotgatconv-block": (nn.DotGatConv(4, 2, 2), block, (x(block.num_src_nodes()),), {}),
            "dotgatconv-block-pair": (
                nn.DotGatConv((4, 3), 2, 2),
                block,
                ((x(block.num_src_nodes()), x(3, 3, 1)),),
                {},
            ),
            "edgegatconv": (
                nn.EdgeGATConv(4, 3, 2, 2, activation=F.elu),
                g,
                (x(6), x(10, 3, 2)),
                {"get_attention": True},
            ),
            "edgegatconv-bipartite": (nn.EdgeGATConv((4, 3), 2, 3, 2), b, ((x(4), x(3, 3, 1)), x(6, 2, 2)), {}),
            "edgegatconv-block": (
                nn.EdgeGATConv(4, 3, 2, 1, residual=False),
                block,
                (x(block.num_src_nodes()), x(block.num_edges(), 3, 2)),
                {},
            ),
            "cfconv": (nn.CFConv(4, 3, 2, 3), g, (x(6), x(10, 3, 2)), {}),
            "cfconv-bipartite": (nn.CFConv(4, 2, 3, 2), b, ((x(4), x(3, 3, 1)), x(6, 2, 2)), {}),
            "gcn2conv": (nn.GCN2Conv(4, 2, alpha=0.3, activation=F.relu), g, (x(6), x(6, 4, 1)), {}),
            "gcn2conv-edge-weight": (
                nn.GCN2Conv(4, 1, 0.5, project_initial_features=False),
                g,
                (x(6), x(6, 4, 1)),
                {"edge_weight": weight},
            ),
            "gatedgraphconv": (
                nn.GatedGraphConv(3, 4, 2, 3),
                g,
                (x(6, 3), torch.tensor([0, 1, 2, 0, 1, 2, 2, 1, 0, 0])),
                {},
            ),
            "gatedgraphconv-one-type": (nn.GatedGraphConv(3, 4, 3, 1), sparse, (x(6, 3),), {}),
            "agnnconv": (nn.AGNNConv(0.5), g, (x(6),), {}),
            "agnnconv-bipartite": (nn.AGNNConv(learn_beta=False), b, ((x(4), x(3, 4, 1)),), {}),
            "agnnconv-block": (nn.AGNNConv(2.0), block, (x(block.num_src_nodes()),), {}),
            "agnnconv-block-pair": (nn.AGNNConv(2.0), block, ((x(block.num_src_nodes()), x(3, 4, 1)),), {}),
            "gineconv": (nn.GINEConv(torch.nn.Linear(4, 2), 0.5, True), sparse, (x(6), x(9, 4, 3)), {}),
            "gineconv-block": (nn.GINEConv(), block, (x(block.num_src_nodes()), x(block.num_edges(), 4, 1)), {}),
            "nnconv": (nn.NNConv(4, 2, torch.nn.Linear(3, 8), residual=True), g, (x(6), x(10, 3, 2)), {}),
            "nnconv-max-bipartite": (
                nn.NNConv((4, 3), 2, torch.nn.Linear(3, 8), "max", residual=True),
                b,
                ((x(4), x(3, 3, 1)), x(6, 3, 2)),
                {},
            ),
            "nnconv-sum-block": (
                nn.NNConv(4, 4, torch.nn.Linear(2, 16), "sum", residual=True),
                block,
                (x(block.num_src_nodes()), x(block.num_edges(), 2, 1)),
                {},
            ),
            "gmmconv": (nn.GMMConv(4, 2, 3, 2, "mean", residual=True), g, (x(6), x(10, 3, 2)), {}),
            "gmmconv-max-bipartite": (
                nn.GMMConv((4, 3), 2, 2, 3, "max", residual=True),
                b,
                ((x(4), x(3, 3, 1)), x(6, 2, 2)),
                {},
            ),
        }
    )
    return out


# --- end of cases ---


# recorded with DGL 2.1.0 (torch 2.2.1, float64): name -> (parameter shapes by name, figures)
EXPECTED = {
    "agnnconv": ({"beta": (1,)}, [0.903591516918731, 0.2914852964195771, 9.16014550630489]),
    "agnnconv-bipartite": ({"beta": (1,)}, [3.583078401448074, 1.1102448663262017, 2.5240802016472914]),
    "agnnconv-block": ({"beta": (1,)}, [-0.5467872287224473, -0.8871028378571384, 4.952606867672287]),
    "agnnconv-block-pair": ({"beta": (1,)}, [-0.21548409768460708, -0.9284073692270862, 4.612169309435254]),
    "cfconv": (
        {
            "project_edge.0.bias": (2,),
            "project_edge.0.weight": (2, 3),
            "project_edge.2.bias": (2,),
            "project_edge.2.weight": (2, 2),
            "project_node.bias": (2,),
            "project_node.weight": (2, 4),
            "project_out.0.bias": (3,),
            "project_out.0.weight": (3, 2),
        },
        [-3.664305791987434, -0.08225221234304951, 0.7860266649571999],
    ),
    "cfconv-bipartite": (
        {
            "project_edge.0.bias": (3,),
            "project_edge.0.weight": (3, 2),
            "project_edge.2.bias": (3,),
            "project_edge.2.weight": (3, 3),
            "project_node.bias": (3,),
            "project_node.weight": (3, 4),
            "project_out.0.bias": (2,),
            "project_out.0.weight": (2, 3),
        },
        [0.8009723924266962, -0.11472754052924812, 0.13721992986867462],
    ),
    "dgnconv": (
        {
            "mixing_layer.0.bias": (4,),
            "mixing_layer.0.weight": (4, 4),
            "towers.0.M.bias": (2,),
            "towers.0.M.weight": (2, 7),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 18),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
            "towers.1.M.bias": (2,),
            "towers.1.M.weight": (2, 7),
            "towers.1.U.bias": (2,),
            "towers.1.U.weight": (2, 18),
            "towers.1.batchnorm.bias": (2,),
            "towers.1.batchnorm.num_batches_tracked": (),
            "towers.1.batchnorm.running_mean": (2,),
            "towers.1.batchnorm.running_var": (2,),
            "towers.1.batchnorm.weight": (2,),
        },
        [11.049552754435753, -0.9646263713644372, 15.304336915579775],
    ),
    "dgnconv-no-direction": (
        {
            "mixing_layer.0.bias": (2,),
            "mixing_layer.0.weight": (2, 2),
            "towers.0.M.bias": (4,),
            "towers.0.M.weight": (4, 8),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 12),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
        },
        [7.274087548024598, -0.2727273070168924, 5.010054548929441],
    ),
    "dotgatconv": ({"fc.weight": (6, 4)}, [12.202030566613846, 7.760339627926902, 17.2947523858785]),
    "dotgatconv-bipartite": (
        {"fc_dst.weight": (4, 3), "fc_src.weight": (4, 4)},
        [0.09300731744015356, -0.4389869459818053, 2.1562719314556027],
    ),
    "dotgatconv-block": ({"fc.weight": (4, 4)}, [-0.03552364527331453, 0.9104824496617188, 3.0869785379930827]),
    "dotgatconv-block-pair": (
        {"fc_dst.weight": (4, 3), "fc_src.weight": (4, 4)},
        [-0.120494872696492, -0.45172712048905383, 3.0032455543207073],
    ),
    "edgegatconv": (
        {
            "attn_edge": (1, 2, 2),
            "attn_l": (1, 2, 2),
            "attn_r": (1, 2, 2),
            "bias": (4,),
            "fc.weight": (4, 4),
            "fc_edge.weight": (4, 3),
            "res_fc.weight": (4, 4),
        },
        [18.98635030642335, 3.7417935682355505, 27.418387726784246],
    ),
    "edgegatconv-bipartite": (
        {
            "attn_edge": (1, 2, 3),
            "attn_l": (1, 2, 3),
            "attn_r": (1, 2, 3),
            "bias": (6,),
            "fc_dst.weight": (6, 3),
            "fc_edge.weight": (6, 2),
            "fc_src.weight": (6, 4),
            "res_fc.weight": (6, 3),
        },
        [0.2477725296252602, -1.2718964799930494, 17.60625256011941],
    ),
    "edgegatconv-block": (
        {
            "attn_edge": (1, 1, 2),
            "attn_l": (1, 1, 2),
            "attn_r": (1, 1, 2),
            "bias": (2,),
            "fc.weight": (2, 4),
            "fc_edge.weight": (2, 3),
        },
        [1.147964775710317, 1.3568294647876882, 2.106125913467882],
    ),
    "egatconv": (
        {
            "attn": (1, 2, 3),
            "bias": (6,),
            "fc_fij.weight": (6, 3),
            "fc_ni.weight": (6, 4),
            "fc_nj.weight": (6, 4),
            "fc_node_src.weight": (4, 4),
        },
        [21.924815573800124, 8.441491254354418, 21.55517727481009],
    ),
    "egatconv-bipartite": (
        {
            "attn": (1, 2, 2),
            "bias": (4,),
            "fc_fij.weight": (4, 2),
            "fc_ni.weight": (4, 4),
            "fc_nj.weight": (4, 3),
            "fc_node_src.weight": (6, 4),
        },
        [8.43955396664158, 2.8627390009523204, 11.357375362576331],
    ),
    "egatconv-edge-weight": (
        {
            "attn": (1, 3, 1),
            "bias": (3,),
            "fc_fij.weight": (3, 3),
            "fc_ni.weight": (3, 4),
            "fc_nj.weight": (3, 4),
            "fc_node_src.weight": (6, 4),
        },
        [11.159496248581322, 8.452840881591749, 42.201403490809675],
    ),
    "gatedgraphconv": (
        {
            "gru.bias_hh": (12,),
            "gru.bias_ih": (12,),
            "gru.weight_hh": (12, 4),
            "gru.weight_ih": (12, 4),
            "linears.0.bias": (4,),
            "linears.0.weight": (4, 4),
            "linears.1.bias": (4,),
            "linears.1.weight": (4, 4),
            "linears.2.bias": (4,),
            "linears.2.weight": (4, 4),
        },
        [-4.309785040365724, -0.9238846508815748, 5.77711914352491],
    ),
    "gatedgraphconv-one-type": (
        {
            "gru.bias_hh": (12,),
            "gru.bias_ih": (12,),
            "gru.weight_hh": (12, 4),
            "gru.weight_ih": (12, 4),
            "linears.0.bias": (4,),
            "linears.0.weight": (4, 4),
        },
        [-6.891157477198512, -0.4225504511956042, 5.6687594213511705],
    ),
    "gcn2conv": ({"bias": (4,), "weight1": (4, 4)}, [10.519900431307324, -0.3824750202864067, 6.983402631298894]),
    "gcn2conv-edge-weight": (
        {"bias": (4,), "weight1": (4, 4), "weight2": (4, 4)},
        [8.701465997627464, 0.37860264587132564, 8.451234991042881],
    ),
    "gineconv": (
        {"apply_func.bias": (2,), "apply_func.weight": (2, 4), "eps": (1,)},
        [2.853841594224617, 0.988031344970521, 5.073097320636187],
    ),
    "gineconv-block": ({"eps": (1,)}, [9.103689143260588, -2.404528760680511, 27.43316501247245]),
    "gmmconv": (
        {"bias": (2,), "fc.weight": (4, 4), "inv_sigma": (2, 3), "mu": (2, 3), "res_fc.weight": (2, 4)},
        [6.3669539008181495, -0.7317920482913147, 6.696257052923554],
    ),
    "gmmconv-max-bipartite": (
        {"bias": (2,), "fc.weight": (6, 4), "inv_sigma": (3, 2), "mu": (3, 2), "res_fc.weight": (2, 3)},
        [6.939774005341958, -2.605780686608944, 17.235707981126218],
    ),
    "nnconv": (
        {"bias": (2,), "edge_func.bias": (8,), "edge_func.weight": (8, 3), "res_fc.weight": (2, 4)},
        [5.448923579239277, 0.18604246385356915, 11.361207450068303],
    ),
    "nnconv-max-bipartite": (
        {"bias": (2,), "edge_func.bias": (8,), "edge_func.weight": (8, 3), "res_fc.weight": (2, 3)},
        [6.971529622976531, -0.959746662524283, 8.843482963734736],
    ),
    "nnconv-sum-block": (
        {"bias": (4,), "edge_func.bias": (16,), "edge_func.weight": (16, 2)},
        [16.598168766129792, -0.6739907911044155, 30.9916894493591],
    ),
    "pnaconv-batch": (
        {
            "mixing_layer.0.bias": (2,),
            "mixing_layer.0.weight": (2, 2),
            "towers.0.M.bias": (4,),
            "towers.0.M.weight": (4, 8),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 20),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
        },
        [10.836952776013774, -0.01892659932264007, 7.2169775339408275],
    ),
    "pnaconv-first": (
        {
            "mixing_layer.0.bias": (4,),
            "mixing_layer.0.weight": (4, 4),
            "towers.0.M.bias": (2,),
            "towers.0.M.weight": (2, 7),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 8),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
            "towers.1.M.bias": (2,),
            "towers.1.M.weight": (2, 7),
            "towers.1.U.bias": (2,),
            "towers.1.U.weight": (2, 8),
            "towers.1.batchnorm.bias": (2,),
            "towers.1.batchnorm.num_batches_tracked": (),
            "towers.1.batchnorm.running_mean": (2,),
            "towers.1.batchnorm.running_var": (2,),
            "towers.1.batchnorm.weight": (2,),
        },
        [10.216548463784733, -1.365428039215843, 18.79202750852842],
    ),
    "pnaconv-moments": (
        {
            "mixing_layer.0.bias": (4,),
            "mixing_layer.0.weight": (4, 4),
            "towers.0.M.bias": (2,),
            "towers.0.M.weight": (2, 7),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 14),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
            "towers.1.M.bias": (2,),
            "towers.1.M.weight": (2, 7),
            "towers.1.U.bias": (2,),
            "towers.1.U.weight": (2, 14),
            "towers.1.batchnorm.bias": (2,),
            "towers.1.batchnorm.num_batches_tracked": (),
            "towers.1.batchnorm.running_mean": (2,),
            "towers.1.batchnorm.running_var": (2,),
            "towers.1.batchnorm.weight": (2,),
        },
        [11.73384644659051, -0.8063468718551428, 20.99775920009524],
    ),
    "pnaconv-spread": (
        {
            "mixing_layer.0.bias": (4,),
            "mixing_layer.0.weight": (4, 4),
            "towers.0.M.bias": (2,),
            "towers.0.M.weight": (2, 7),
            "towers.0.U.bias": (2,),
            "towers.0.U.weight": (2, 20),
            "towers.0.batchnorm.bias": (2,),
            "towers.0.batchnorm.num_batches_tracked": (),
            "towers.0.batchnorm.running_mean": (2,),
            "towers.0.batchnorm.running_var": (2,),
            "towers.0.batchnorm.weight": (2,),
            "towers.1.M.bias": (2,),
            "towers.1.M.weight": (2, 7),
            "towers.1.U.bias": (2,),
            "towers.1.U.weight": (2, 20),
            "towers.1.batchnorm.bias": (2,),
            "towers.1.batchnorm.num_batches_tracked": (),
            "towers.1.batchnorm.running_mean": (2,),
            "towers.1.batchnorm.running_var": (2,),
            "towers.1.batchnorm.weight": (2,),
        },
        [14.524658914757405, -1.1046333540235116, 25.260445133208542],
    ),
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
