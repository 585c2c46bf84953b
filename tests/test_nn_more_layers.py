"""``gnnc.nn``'s dense convolutions, graph transformer modules, label propagation and layer utilities against
DGL 2.1: parameter names and shapes as DGL's state dicts hold them, and the numbers DGL computes, eagerly and
(for the modules that pass messages) compiled.

``EXPECTED`` was recorded by running ``cases`` (the section between the markers, which imports nothing of
gnnc) with DGL 2.1 itself: ``G`` ``dgl``, ``nn`` ``dgl.nn.pytorch``. Every case fills its parameters (not its
buffers) from their names in sorted order and runs in eval mode (no dropout), so a parameter gnnc named or
shaped otherwise changes the names or the numbers; ``test_nn_dgl_names``' ``figures`` sums the output.
"""

import functools
import warnings

import numpy as np
import pytest
import torch

import gnnc
import gnnc.nn
from gnnc.compiler.driver import recording

from .test_nn_dgl_names import figures


# --- cases: DGL-agnostic (run by DGL 2.1 to record EXPECTED) ---
def cases(G, nn):
    """name -> (module, positional inputs, keyword inputs, passes messages); ``G`` is gnnc or dgl, ``nn`` its
    layers."""

    def homo():  # 6 nodes, each with an in-edge; a multi-edge 1->1 self loop
        return G.graph((torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 1, 1]), torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 1, 1])))

    def bipartite():
        return G.heterograph(
            {("u", "r", "v"): (torch.tensor([0, 1, 2, 3, 3, 0]), torch.tensor([0, 0, 1, 2, 1, 2]))}, {"u": 4, "v": 3}
        )

    def x(rows, width=4, shift=0.0):
        return torch.arange(rows * width, dtype=torch.float64).add(shift).sin().view(rows, width)

    class WithGraph(torch.nn.Module):
        """A layer called as ``layer(graph_or_list, *inputs)`` (DGL's ``Sequential``)."""

        def __init__(self, layer, graph):
            super().__init__()
            self.layer, self.graph = layer, graph

        def forward(self, *inputs):
            return self.layer(self.graph, *inputs)

    class Double(torch.nn.Module):
        """``y = x + A x`` and ``e + (y_u + y_v)``: a layer of two outputs for ``Sequential``."""

        def forward(self, graph, n_feat, e_feat):
            with graph.local_scope():
                graph.ndata["h"] = n_feat
                graph.update_all(G.function.copy_u("h", "m"), G.function.sum("m", "h"))
                n_feat = n_feat + graph.ndata["h"]
                graph.ndata["h"] = n_feat
                graph.apply_edges(G.function.u_add_v("h", "h", "e"))
                return n_feat, e_feat + graph.edata["e"]

    g, b = homo(), bipartite()
    adj, adj_b = g.adj_external(transpose=True).to_dense(), b.adj_external(transpose=True).to_dense()
    labels = torch.tensor([0, 2, 1, 3, 0, 1])
    multi = torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0]]).bool()
    mask = torch.tensor([1, 1, 0, 1, 0, 0]).bool()
    eigvals, eigvecs = x(5, 3), x(5, 3, shift=2.0)
    eigvals[3:, 2] = float("nan")  # padding: nodes 3, 4 have two eigenpairs
    eigvecs[3:, 2] = float("nan")
    batch = x(6, 8).view(2, 3, 8)
    bias = x(18, 2, shift=1.0).view(2, 3, 3, 2)
    attn_mask = torch.tensor([[0, 1, 0], [0, 0, 0], [1, 0, 0]]).bool().expand(2, 3, 3)
    degrees = torch.tensor([[0, 1, 3, 7], [2, 0, 0, 1]])
    out = {
        f"densegraphconv-{norm}-{wide}": (
            nn.DenseGraphConv(*wide, norm=norm, activation=torch.relu),
            (adj, x(6, wide[0])),
            {},
            False,
        )
        for norm in ("both", "right", "none")
        for wide in ((4, 2), (2, 4))
    }
    out.update(
        {
            "densegraphconv-bipartite": (nn.DenseGraphConv(4, 2), (adj_b, x(4)), {}, False),
            "densesageconv": (nn.DenseSAGEConv(4, 2, activation=torch.relu), (adj, x(6)), {}, False),
            "densesageconv-bipartite": (nn.DenseSAGEConv(4, 2, bias=False), (adj_b, (x(4), x(3, shift=1))), {}, False),
            "densechebconv": (nn.DenseChebConv(4, 2, 3), (adj, x(6)), {"lambda_max": 1.5}, False),
            "densechebconv-k1": (nn.DenseChebConv(4, 2, 1, bias=False), (adj, x(6)), {"lambda_max": 2.0}, False),
            "lappos-transformer": (
                nn.LapPosEncoder("Transformer", 2, 3, 4, n_head=2, num_post_layer=1),
                (eigvals, eigvecs),
                {},
                False,
            ),
            "lappos-deepset": (
                nn.LapPosEncoder("DeepSet", 3, 3, 4, batch_norm=True, num_post_layer=3),
                (eigvals, eigvecs),
                {},
                False,
            ),
            "lappos-deepset-1": (nn.LapPosEncoder("DeepSet", 1, 3, 4), (eigvals, eigvecs), {}, False),
            "biasedmha-add": (nn.BiasedMHA(8, 2), (batch, bias, attn_mask), {}, False),
            "biasedmha-mul": (
                nn.BiasedMHA(8, 4, bias=False, attn_bias_type="mul"),
                (batch, bias.repeat(1, 1, 1, 2)),
                {},
                False,
            ),
            "biasedmha-plain": (nn.BiasedMHA(8, 2), (batch,), {}, False),
            "degreeencoder-both": (nn.DegreeEncoder(4, 3), (torch.stack([degrees, degrees.flip(1)]),), {}, False),
            "degreeencoder-in": (nn.DegreeEncoder(2, 3, direction="in"), (degrees,), {}, False),
            "jumpingknowledge-cat": (nn.JumpingKnowledge(), ([x(6), x(6, shift=1)],), {}, False),
            "jumpingknowledge-max": (nn.JumpingKnowledge("max"), ([x(6), x(6, shift=1)],), {}, False),
            "jumpingknowledge-lstm": (nn.JumpingKnowledge("lstm", 4, 2), ([x(6), x(6, shift=1)],), {}, False),
            "sequential": (WithGraph(nn.Sequential(Double(), Double()), g), (x(6), x(10, shift=3)), {}, True),
            "sequential-list": (
                WithGraph(nn.Sequential(nn.GraphConv(4, 4), nn.GraphConv(4, 2)), [g, g]),
                (x(6),),
                {},
                True,
            ),
        }
    )
    kernels = [torch.tensor(v, dtype=torch.float64) for v in ([12.0, 12.0], [0.0, 2.0], [4.0, 4.0], [6.0, 8.0])]
    elements = torch.tensor([[6.0], [8.0], [1.0], [6.0], [8.0], [6.0]], dtype=torch.float64)
    out.update(
        {
            "egnnconv": (WithGraph(nn.EGNNConv(4, 3, 2, 2), g), (x(6), x(6, 3, shift=5), x(10, 2, shift=7)), {}, True),
            "egnnconv-no-edge-feat": (WithGraph(nn.EGNNConv(4, 3, 2), g), (x(6), x(6, 3, shift=5)), {}, True),
            "atomicconv": (WithGraph(nn.AtomicConv(*kernels), g), (elements, x(10, 1).abs()), {}, True),
            "atomicconv-plain": (WithGraph(nn.AtomicConv(*kernels[:3]), g), (x(6, 1), x(10, 1).abs()), {}, True),
        }
    )
    pairs = x(18, 3, shift=2).view(2, 3, 3, 3)
    egt_mask = attn_mask.double() * -1e9
    dist = torch.tensor([[[0, 1, 2], [1, 0, -1], [3, 1, 0]], [[0, 2, 5], [1, 0, 1], [-1, -1, 0]]])
    out.update(
        {
            "egtlayer": (nn.EGTLayer(8, 3, 2, 1), (batch, pairs, egt_mask), {}, False),
            "egtlayer-nodes": (nn.EGTLayer(8, 3, 4, 0, edge_update=False), (batch, pairs), {}, False),
            "graphormerlayer": (nn.GraphormerLayer(8, 6, 2), (batch, bias, attn_mask), {}, False),
            "graphormerlayer-mul-norm-first": (
                nn.GraphormerLayer(8, 6, 2, "mul", norm_first=True),
                (batch, bias),
                {},
                False,
            ),
            "pathencoder": (nn.PathEncoder(2, 3, num_heads=2), (dist, x(36, 3).view(2, 3, 3, 2, 3)), {}, False),
            "spatialencoder": (nn.SpatialEncoder(2, num_heads=3), (dist,), {}, False),
            "spatialencoder3d": (
                nn.SpatialEncoder3d(4, num_heads=2, max_node_type=3),
                (x(6, 3).view(2, 3, 3), torch.tensor([[1, 0, 2], [2, 2, 0]])),
                {},
                False,
            ),
            "spatialencoder3d-untyped": (nn.SpatialEncoder3d(3), (x(6, 3).view(2, 3, 3),), {}, False),
        }
    )

    class Edges(torch.nn.Module):
        """A graph-building module's edges (and distances) as one tensor."""

        def __init__(self, build):
            super().__init__()
            self.build = build

        def forward(self, points):
            g, dists = self.build(points, get_distances=True)
            return torch.cat([torch.stack(g.edges()).double().reshape(-1), dists.reshape(-1)])

    rels = torch.tensor([0, 2, 1, 1, 0, 2])
    out.update(
        {
            f"edgepredictor-{op}": (nn.EdgePredictor(op, 4, 3, bias=op == "cat"), (x(6), x(6, shift=1)), {}, False)
            for op in ("dot", "cos", "ele", "cat")
        }
    )
    out.update(
        {
            "edgepredictor-plain": (nn.EdgePredictor("ele"), (x(6), x(6, shift=1)), {}, False),
            "transe": (nn.TransE(3, 4), (x(6), x(6, shift=1), rels), {}, False),
            "transe-p2": (nn.TransE(3, 4, p=2), (x(6), x(6, shift=1), rels), {}, False),
            "transr": (nn.TransR(3, 2, 4), (x(6), x(6, shift=1), rels), {}, False),
            "radiusgraph": (Edges(nn.RadiusGraph(0.9)), (x(8, 3).view(8, 3),), {}, False),
            "radiusgraph-self-loop-p1": (
                Edges(nn.RadiusGraph(1.2, p=1, self_loop=True)),
                (x(8, 3).view(8, 3),),
                {},
                False,
            ),
        }
    )

    class Values(torch.nn.Module):
        """A module's dict output as one tensor, keys in sorted order of their names."""

        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, inputs):
            out = self.module(inputs)
            return torch.cat([out[k].reshape(-1) for k in sorted(out, key=str)])

    follows = ("user", "follows", "user")
    out.update(
        {
            "heterolinear": (
                Values(nn.HeteroLinear({"user": 2, follows: 4}, 3)),
                ({"user": x(3, 2), follows: x(2)},),
                {},
                False,
            ),
            "heteroembedding": (
                Values(nn.HeteroEmbedding({"user": 2, follows: 3}, 4)),
                ({"user": torch.tensor([1, 0, 1]), follows: torch.tensor([2])},),
                {},
                False,
            ),
        }
    )
    out.update(
        {
            "grouprevres": (WithGraph(nn.GroupRevRes(nn.GraphConv(2, 2), 2), g), (x(6),), {}, True),
            "grouprevres-4": (WithGraph(nn.GroupRevRes(nn.GraphConv(1, 1, norm="right"), 4), g), (x(6),), {}, True),
        }
    )
    ntypes, etypes = torch.tensor([0, 1, 1, 0, 1, 0]), torch.tensor([0, 2, 1, 1, 0, 2, 2, 0, 1, 1])
    block = G.to_block(G.in_subgraph(g, torch.tensor([0, 1, 2])), torch.tensor([0, 1, 2]))
    block_rows = block.srcdata["_ID"]
    out.update(
        {
            "hgtconv": (WithGraph(nn.HGTConv(4, 2, 2, 2, 3), g), (x(6), ntypes, etypes), {}, True),
            "hgtconv-residual-norm": (
                WithGraph(nn.HGTConv(3, 2, 1, 2, 3, use_norm=True), g),
                (x(6, 3), ntypes, etypes),
                {},
                True,
            ),
            "hgtconv-block": (
                WithGraph(nn.HGTConv(4, 4, 1, 2, 3), block),
                (x(6)[block_rows], ntypes[block_rows], etypes[block.edata["_ID"]]),
                {},
                True,
            ),
        }
    )
    sets = G.batch(
        [
            G.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))),
            G.graph((torch.tensor([0, 1]), torch.tensor([1, 0]))),
        ]
    )
    out.update(
        {
            "settransformerencoder-sab": (WithGraph(nn.SetTransformerEncoder(4, 2, 2, 6, 2), sets), (x(5),), {}, False),
            "settransformerencoder-isab": (
                WithGraph(nn.SetTransformerEncoder(4, 2, 3, 6, 1, "isab", 2), sets),
                (x(5),),
                {},
                False,
            ),
            "settransformerdecoder": (WithGraph(nn.SetTransformerDecoder(4, 2, 2, 6, 1, 3), sets), (x(5),), {}, False),
        }
    )
    looped = G.graph((torch.tensor([0, 1, 2, 3, 2, 5, 1]), torch.tensor([1, 2, 3, 4, 0, 3, 1])))
    out.update(
        {
            "twirlsconv": (WithGraph(nn.TWIRLSConv(4, 2, 3, prop_step=4), looped), (x(6).float(),), {}, True),
            "twirlsconv-attention": (
                WithGraph(
                    nn.TWIRLSConv(
                        4, 2, 3, 5, num_mlp_before=2, norm="layer", attention=True, T=2.0, use_eta=True, attn_bef=True
                    ),
                    looped,
                ),
                (x(6).float(),),
                {},
                True,
            ),
            "twirlsconv-no-precond": (
                WithGraph(
                    nn.TWIRLSConv(
                        4, 2, 3, 3, num_mlp_after=0, precond=False, lam=2, alp=0.3, tau=0.5, p=0.5, attention=True
                    ),
                    looped,
                ),
                (x(6).float(),),
                {},
                True,
            ),
            # propagates once, on its first call, then reuses the result (DGL's cache): nothing left to compile
            "twirlsconv-cached": (
                WithGraph(nn.TWIRLSConv(4, 2, 3, 3, num_mlp_before=0, num_mlp_after=2), looped),
                (x(6).float(),),
                {},
                False,
            ),
        }
    )
    for norm in ("sym", "row"):
        for clamp, normalize, reset in ((True, False, False), (False, True, True), (False, False, True)):
            name = f"labelprop-{norm}-{int(clamp)}{int(normalize)}{int(reset)}"
            out[name] = (
                WithGraph(nn.LabelPropagation(3, 0.6, norm, clamp, normalize, reset), g),
                (labels, mask),
                {},
                True,
            )
    out["labelprop-multilabel"] = (WithGraph(nn.LabelPropagation(2, 0.3, "sym", reset=True), g), (multi,), {}, True)
    return out


def fill(module):
    """Every trainable parameter, by sorted name, from one deterministic sequence."""
    start = 0
    for name, value in sorted(module.named_parameters()):
        if not value.requires_grad:
            continue
        n = value.numel()
        value.copy_(torch.arange(start, start + n, dtype=torch.float64).mul(0.37).cos().mul(0.5).view(value.shape))
        start += n
    return {name: tuple(value.shape) for name, value in sorted(module.named_parameters())}


# --- end of cases ---


# recorded with DGL 2.1.0 (torch 2.2.1): name -> (parameter shapes by name, figures)
EXPECTED = {
    "atomicconv": (
        {
            "layer.features_to_use": (2,),
            "layer.radial_pooling.interaction_cutoffs": (2, 1, 1),
            "layer.radial_pooling.rbf_kernel_means": (2, 1, 1),
            "layer.radial_pooling.rbf_kernel_scaling": (2, 1, 1),
        },
        [4.467661003348085, -0.5058109185123767, 3.5831782780652595],
    ),
    "atomicconv-plain": (
        {
            "layer.radial_pooling.interaction_cutoffs": (2, 1, 1),
            "layer.radial_pooling.rbf_kernel_means": (2, 1, 1),
            "layer.radial_pooling.rbf_kernel_scaling": (2, 1, 1),
        },
        [0.316786376391189, 0.07087098562589735, 0.030340812128628193],
    ),
    "biasedmha-add": (
        {
            "k_proj.bias": (8,),
            "k_proj.weight": (8, 8),
            "out_proj.bias": (8,),
            "out_proj.weight": (8, 8),
            "q_proj.bias": (8,),
            "q_proj.weight": (8, 8),
            "v_proj.bias": (8,),
            "v_proj.weight": (8, 8),
        },
        [-12.353012005301903, -1.0538734690670446, 31.07726508069017],
    ),
    "biasedmha-mul": (
        {"k_proj.weight": (8, 8), "out_proj.weight": (8, 8), "q_proj.weight": (8, 8), "v_proj.weight": (8, 8)},
        [0.039013956592323776, 0.02802597011478783, 0.01659378081194717],
    ),
    "biasedmha-plain": (
        {
            "k_proj.bias": (8,),
            "k_proj.weight": (8, 8),
            "out_proj.bias": (8,),
            "out_proj.weight": (8, 8),
            "q_proj.bias": (8,),
            "q_proj.weight": (8, 8),
            "v_proj.bias": (8,),
            "v_proj.weight": (8, 8),
        },
        [-12.524012306019825, -1.092077616733419, 33.854337699262146],
    ),
    "degreeencoder-both": (
        {"encoder1.weight": (5, 3), "encoder2.weight": (5, 3)},
        [5.424901905923068, 2.696810961945653, 6.739687462256175],
    ),
    "degreeencoder-in": ({"encoder.weight": (3, 3)}, [0.6062359025171853, 0.5392353090382302, 3.495559638054268]),
    "densechebconv": ({"W": (3, 4, 2), "bias": (2,)}, [-4.459054014152548, -0.39207783734489743, 19.815950787716066]),
    "densechebconv-k1": ({"W": (1, 4, 2)}, [0.8104936637277618, 1.4786823580289066, 6.416424510940418]),
    "densegraphconv-bipartite": (
        {"bias": (2,), "weight": (4, 2)},
        [1.0985442460649169, -0.30728801808953177, 1.1841344360673176],
    ),
    "densegraphconv-both-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.453983233214702, -1.7960582238769316, 5.871004913790599],
    ),
    "densegraphconv-both-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [6.487971479606013, 0.01568113878763211, 6.230797759163702],
    ),
    "densegraphconv-none-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.86347097532497, -0.7895079224414592, 6.785908038809531],
    ),
    "densegraphconv-none-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [7.717643218547047, 1.1438853591505014, 9.964396577963575],
    ),
    "densegraphconv-right-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.620853110195268, -1.5220687692440593, 6.052079996218048],
    ),
    "densegraphconv-right-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [6.210764910032004, -0.026993910770814145, 6.007665070325191],
    ),
    "densesageconv": (
        {"fc.bias": (2,), "fc.weight": (2, 4)},
        [5.867761656985344, 0.3839728654770404, 4.079799668308539],
    ),
    "densesageconv-bipartite": ({"fc.weight": (2, 4)}, [0.12493962456967247, -0.27733154151656775, 0.2334634215978755]),
    "edgepredictor-cat": (
        {"linear.bias": (3,), "linear.weight": (3, 8)},
        [8.248856981898397, 1.217302349028909, 20.108012426886486],
    ),
    "edgepredictor-cos": ({"linear.weight": (3, 1)}, [4.389409421794825, 0.09045983407607758, 1.1364286100591388]),
    "edgepredictor-dot": ({"linear.weight": (3, 1)}, [8.963024384325541, 0.3186539881259074, 4.923581781738033]),
    "edgepredictor-ele": ({"linear.weight": (3, 4)}, [-1.48179307689919, -0.7494891418625386, 2.9993976859847105]),
    "edgepredictor-plain": ({}, [6.711875190294744, 0.2517748912206016, 4.942488451065657]),
    "egnnconv": (
        {
            "layer.coord_mlp.0.bias": (3,),
            "layer.coord_mlp.0.weight": (3, 3),
            "layer.coord_mlp.2.weight": (1, 3),
            "layer.edge_mlp.0.bias": (3,),
            "layer.edge_mlp.0.weight": (3, 11),
            "layer.edge_mlp.2.bias": (3,),
            "layer.edge_mlp.2.weight": (3, 3),
            "layer.node_mlp.0.bias": (3,),
            "layer.node_mlp.0.weight": (3, 7),
            "layer.node_mlp.2.bias": (2,),
            "layer.node_mlp.2.weight": (2, 3),
        },
        [2.9451626835756626, -0.3419210376014239, 9.144605752753264],
    ),
    "egnnconv-no-edge-feat": (
        {
            "layer.coord_mlp.0.bias": (3,),
            "layer.coord_mlp.0.weight": (3, 3),
            "layer.coord_mlp.2.weight": (1, 3),
            "layer.edge_mlp.0.bias": (3,),
            "layer.edge_mlp.0.weight": (3, 9),
            "layer.edge_mlp.2.bias": (3,),
            "layer.edge_mlp.2.weight": (3, 3),
            "layer.node_mlp.0.bias": (3,),
            "layer.node_mlp.0.weight": (3, 7),
            "layer.node_mlp.2.bias": (2,),
            "layer.node_mlp.2.weight": (2, 3),
        },
        [2.141575651325514, 0.2927886831862887, 10.287675989667173],
    ),
    "egtlayer": (
        {
            "edge_ffn.0.bias": (3,),
            "edge_ffn.0.weight": (3,),
            "edge_ffn.1.bias": (3,),
            "edge_ffn.1.weight": (3, 3),
            "edge_ffn.3.bias": (3,),
            "edge_ffn.3.weight": (3, 3),
            "edge_input.bias": (2,),
            "edge_input.weight": (2, 3),
            "edge_output.bias": (3,),
            "edge_output.weight": (3, 2),
            "gate.bias": (2,),
            "gate.weight": (2, 3),
            "mha_ln_e.bias": (3,),
            "mha_ln_e.weight": (3,),
            "mha_ln_h.bias": (8,),
            "mha_ln_h.weight": (8,),
            "node_ffn.0.bias": (8,),
            "node_ffn.0.weight": (8,),
            "node_ffn.1.bias": (8,),
            "node_ffn.1.weight": (8, 8),
            "node_ffn.3.bias": (8,),
            "node_ffn.3.weight": (8, 8),
            "node_output.bias": (8,),
            "node_output.weight": (8, 8),
            "qkv_proj.bias": (24,),
            "qkv_proj.weight": (24, 8),
        },
        [96.97878761625279, 19.86755452010684, 227.92744100756846],
    ),
    "egtlayer-nodes": (
        {
            "edge_input.bias": (4,),
            "edge_input.weight": (4, 3),
            "gate.bias": (4,),
            "gate.weight": (4, 3),
            "mha_ln_e.bias": (3,),
            "mha_ln_e.weight": (3,),
            "mha_ln_h.bias": (8,),
            "mha_ln_h.weight": (8,),
            "node_ffn.0.bias": (8,),
            "node_ffn.0.weight": (8,),
            "node_ffn.1.bias": (8,),
            "node_ffn.1.weight": (8, 8),
            "node_ffn.3.bias": (8,),
            "node_ffn.3.weight": (8, 8),
            "node_output.bias": (8,),
            "node_output.weight": (8, 8),
            "qkv_proj.bias": (24,),
            "qkv_proj.weight": (24, 8),
        },
        [-7.796401808970545, 2.610993045009667, 49.125509116920924],
    ),
    "graphormerlayer": (
        {
            "attn.k_proj.bias": (8,),
            "attn.k_proj.weight": (8, 8),
            "attn.out_proj.bias": (8,),
            "attn.out_proj.weight": (8, 8),
            "attn.q_proj.bias": (8,),
            "attn.q_proj.weight": (8, 8),
            "attn.v_proj.bias": (8,),
            "attn.v_proj.weight": (8, 8),
            "attn_layer_norm.bias": (8,),
            "attn_layer_norm.weight": (8,),
            "ffn.0.bias": (6,),
            "ffn.0.weight": (6, 8),
            "ffn.3.bias": (8,),
            "ffn.3.weight": (8, 6),
            "ffn_layer_norm.bias": (8,),
            "ffn_layer_norm.weight": (8,),
        },
        [-10.852689590374396, 0.35779069807347047, 9.651685353558095],
    ),
    "graphormerlayer-mul-norm-first": (
        {
            "attn.k_proj.bias": (8,),
            "attn.k_proj.weight": (8, 8),
            "attn.out_proj.bias": (8,),
            "attn.out_proj.weight": (8, 8),
            "attn.q_proj.bias": (8,),
            "attn.q_proj.weight": (8, 8),
            "attn.v_proj.bias": (8,),
            "attn.v_proj.weight": (8, 8),
            "attn_layer_norm.bias": (8,),
            "attn_layer_norm.weight": (8,),
            "ffn.0.bias": (6,),
            "ffn.0.weight": (6, 8),
            "ffn.3.bias": (8,),
            "ffn.3.weight": (8, 6),
            "ffn_layer_norm.bias": (8,),
            "ffn_layer_norm.weight": (8,),
        },
        [-10.488428058171122, -1.4523076131374526, 92.35677912784296],
    ),
    "grouprevres": (
        {
            "layer.gnn_modules.0.bias": (2,),
            "layer.gnn_modules.0.weight": (2, 2),
            "layer.gnn_modules.1.bias": (2,),
            "layer.gnn_modules.1.weight": (2, 2),
        },
        [-2.91073095938769, -2.4967015260147964, 20.85296722849105],
    ),
    "grouprevres-4": (
        {
            "layer.gnn_modules.0.bias": (1,),
            "layer.gnn_modules.0.weight": (1, 1),
            "layer.gnn_modules.1.bias": (1,),
            "layer.gnn_modules.1.weight": (1, 1),
            "layer.gnn_modules.2.bias": (1,),
            "layer.gnn_modules.2.weight": (1, 1),
            "layer.gnn_modules.3.bias": (1,),
            "layer.gnn_modules.3.weight": (1, 1),
        },
        [5.088742135765977, -1.5484719254690626, 15.005758860492273],
    ),
    "heteroembedding": (
        {"module.embeds.('user', 'follows', 'user').weight": (3, 4), "module.embeds.user.weight": (2, 4)},
        [2.4030212736693066, 2.57215460551949, 2.6003710351047538],
    ),
    "heterolinear": (
        {
            "module.linears.('user', 'follows', 'user').bias": (3,),
            "module.linears.('user', 'follows', 'user').weight": (3, 4),
            "module.linears.user.bias": (3,),
            "module.linears.user.weight": (3, 2),
        },
        [6.456448621456039, 0.5248223200625285, 5.498145944345177],
    ),
    "hgtconv": (
        {
            "layer.linear_a.W": (2, 4, 4),
            "layer.linear_k.W": (2, 4, 4),
            "layer.linear_q.W": (2, 4, 4),
            "layer.linear_v.W": (2, 4, 4),
            "layer.relation_att.0.W": (3, 2, 2),
            "layer.relation_att.1.W": (3, 2, 2),
            "layer.relation_msg.0.W": (3, 2, 2),
            "layer.relation_msg.1.W": (3, 2, 2),
            "layer.relation_pri.0": (3,),
            "layer.relation_pri.1": (3,),
            "layer.skip": (2,),
        },
        [1.3371149910731581, -0.5387511269288521, 2.442482087345572],
    ),
    "hgtconv-block": (
        {
            "layer.linear_a.W": (2, 4, 4),
            "layer.linear_k.W": (2, 4, 4),
            "layer.linear_q.W": (2, 4, 4),
            "layer.linear_v.W": (2, 4, 4),
            "layer.relation_att.0.W": (3, 4, 4),
            "layer.relation_msg.0.W": (3, 4, 4),
            "layer.relation_pri.0": (3,),
            "layer.skip": (2,),
        },
        [0.27361364380782915, -0.7890254996789456, 2.0333253809697496],
    ),
    "hgtconv-residual-norm": (
        {
            "layer.linear_a.W": (2, 2, 2),
            "layer.linear_k.W": (2, 3, 2),
            "layer.linear_q.W": (2, 3, 2),
            "layer.linear_v.W": (2, 3, 2),
            "layer.norm.bias": (2,),
            "layer.norm.weight": (2,),
            "layer.relation_att.0.W": (3, 2, 2),
            "layer.relation_msg.0.W": (3, 2, 2),
            "layer.relation_pri.0": (3,),
            "layer.residual_w": (3, 2),
            "layer.skip": (2,),
        },
        [-4.403604004968792, -0.10554166766903039, 1.7680846232638934],
    ),
    "jumpingknowledge-cat": ({}, [1.0540332569739033, -2.7394745146727555, 24.246645322596528]),
    "jumpingknowledge-lstm": (
        {
            "att.bias": (1,),
            "att.weight": (1, 8),
            "lstm.bias_hh_l0": (16,),
            "lstm.bias_hh_l0_reverse": (16,),
            "lstm.bias_ih_l0": (16,),
            "lstm.bias_ih_l0_reverse": (16,),
            "lstm.weight_hh_l0": (16, 4),
            "lstm.weight_hh_l0_reverse": (16, 4),
            "lstm.weight_ih_l0": (16, 4),
            "lstm.weight_ih_l0_reverse": (16, 4),
        },
        [0.512683360108136, -1.452984072395091, 9.447055542910164],
    ),
    "jumpingknowledge-max": ({}, [7.702326062455224, -1.592767755342225, 12.48990877587953]),
    "labelprop-multilabel": ({}, [7.0, -1.7058823529411764, 7.0]),
    "labelprop-row-001": ({}, [4.560000061988831, -0.5165217130080513, 3.7848000623703015]),
    "labelprop-row-011": ({}, [6.0, 0.30434782608695654, 5.5]),
    "labelprop-row-100": ({}, [3.4020003005862236, -0.4020000394919645, 1.1867882027502177]),
    "labelprop-sym-001": ({}, [4.304891675710678, -0.4783479040083678, 3.5556000265773102]),
    "labelprop-sym-011": ({}, [5.999999970197678, 0.31180748602618347, 5.514718588924535]),
    "labelprop-sym-100": ({}, [3.0864831507205963, -0.44258692666240357, 1.0408694702049632]),
    "lappos-deepset": (
        {
            "linear.bias": (8,),
            "linear.weight": (8, 2),
            "pe_encoder.1.bias": (8,),
            "pe_encoder.1.weight": (8, 8),
            "pe_encoder.3.bias": (4,),
            "pe_encoder.3.weight": (4, 8),
            "post_mlp.0.bias": (8,),
            "post_mlp.0.weight": (8, 4),
            "post_mlp.2.bias": (8,),
            "post_mlp.2.weight": (8, 8),
            "post_mlp.4.bias": (4,),
            "post_mlp.4.weight": (4, 8),
            "raw_norm.bias": (3,),
            "raw_norm.weight": (3,),
        },
        [0.05555734038352966, -0.014918250472922074, 0.001447106152796529],
    ),
    "lappos-deepset-1": (
        {"linear.bias": (4,), "linear.weight": (4, 2)},
        [18.94268772006035, -2.1678938567638397, 26.973701018389765],
    ),
    "lappos-transformer": (
        {
            "linear.bias": (4,),
            "linear.weight": (4, 2),
            "pe_encoder.layers.0.linear1.bias": (2048,),
            "pe_encoder.layers.0.linear1.weight": (2048, 4),
            "pe_encoder.layers.0.linear2.bias": (4,),
            "pe_encoder.layers.0.linear2.weight": (4, 2048),
            "pe_encoder.layers.0.norm1.bias": (4,),
            "pe_encoder.layers.0.norm1.weight": (4,),
            "pe_encoder.layers.0.norm2.bias": (4,),
            "pe_encoder.layers.0.norm2.weight": (4,),
            "pe_encoder.layers.0.self_attn.in_proj_bias": (12,),
            "pe_encoder.layers.0.self_attn.in_proj_weight": (12, 4),
            "pe_encoder.layers.0.self_attn.out_proj.bias": (4,),
            "pe_encoder.layers.0.self_attn.out_proj.weight": (4, 4),
            "pe_encoder.layers.1.linear1.bias": (2048,),
            "pe_encoder.layers.1.linear1.weight": (2048, 4),
            "pe_encoder.layers.1.linear2.bias": (4,),
            "pe_encoder.layers.1.linear2.weight": (4, 2048),
            "pe_encoder.layers.1.norm1.bias": (4,),
            "pe_encoder.layers.1.norm1.weight": (4,),
            "pe_encoder.layers.1.norm2.bias": (4,),
            "pe_encoder.layers.1.norm2.weight": (4,),
            "pe_encoder.layers.1.self_attn.in_proj_bias": (12,),
            "pe_encoder.layers.1.self_attn.in_proj_weight": (12, 4),
            "pe_encoder.layers.1.self_attn.out_proj.bias": (4,),
            "pe_encoder.layers.1.self_attn.out_proj.weight": (4, 4),
            "post_mlp.0.bias": (4,),
            "post_mlp.0.weight": (4, 4),
        },
        [1.9967619180679321, -0.3049413091257998, 0.9238579972973131],
    ),
    "pathencoder": ({"embedding_table.weight": (4, 3)}, [-7.961598456361036, 2.0044406890412203, 26.513259546286726]),
    "radiusgraph": ({}, [149.75450416027005, -31.680000298490953, 673.3253621275207]),
    "radiusgraph-self-loop-p1": ({}, [210.85634704022084, -39.21772946286594, 960.2966744033281]),
    "sequential": ({}, [-21.05991567630987, -11.94122981691864, 2053.6094248628133]),
    "sequential-list": (
        {"layer.0.bias": (4,), "layer.0.weight": (4, 4), "layer.1.bias": (2,), "layer.1.weight": (4, 2)},
        [-4.224699014445872, -0.9511253748531839, 4.269358447647329],
    ),
    "settransformerdecoder": (
        {
            "layer.layers.0.mha.ffn.0.bias": (6,),
            "layer.layers.0.mha.ffn.0.weight": (6, 4),
            "layer.layers.0.mha.ffn.3.bias": (4,),
            "layer.layers.0.mha.ffn.3.weight": (4, 6),
            "layer.layers.0.mha.norm_in.bias": (4,),
            "layer.layers.0.mha.norm_in.weight": (4,),
            "layer.layers.0.mha.norm_inter.bias": (4,),
            "layer.layers.0.mha.norm_inter.weight": (4,),
            "layer.layers.0.mha.proj_k.weight": (4, 4),
            "layer.layers.0.mha.proj_o.weight": (4, 4),
            "layer.layers.0.mha.proj_q.weight": (4, 4),
            "layer.layers.0.mha.proj_v.weight": (4, 4),
            "layer.pma.ffn.0.bias": (6,),
            "layer.pma.ffn.0.weight": (6, 4),
            "layer.pma.ffn.3.bias": (4,),
            "layer.pma.ffn.3.weight": (4, 6),
            "layer.pma.mha.ffn.0.bias": (6,),
            "layer.pma.mha.ffn.0.weight": (6, 4),
            "layer.pma.mha.ffn.3.bias": (4,),
            "layer.pma.mha.ffn.3.weight": (4, 6),
            "layer.pma.mha.norm_in.bias": (4,),
            "layer.pma.mha.norm_in.weight": (4,),
            "layer.pma.mha.norm_inter.bias": (4,),
            "layer.pma.mha.norm_inter.weight": (4,),
            "layer.pma.mha.proj_k.weight": (4, 4),
            "layer.pma.mha.proj_o.weight": (4, 4),
            "layer.pma.mha.proj_q.weight": (4, 4),
            "layer.pma.mha.proj_v.weight": (4, 4),
            "layer.pma.seed_vectors": (3, 4),
        },
        [8.710127617698992, -0.08190662308708571, 3.77889421972446],
    ),
    "settransformerencoder-isab": (
        {
            "layer.layers.0.inducing_points": (2, 4),
            "layer.layers.0.mha.0.ffn.0.bias": (6,),
            "layer.layers.0.mha.0.ffn.0.weight": (6, 4),
            "layer.layers.0.mha.0.ffn.3.bias": (4,),
            "layer.layers.0.mha.0.ffn.3.weight": (4, 6),
            "layer.layers.0.mha.0.norm_in.bias": (4,),
            "layer.layers.0.mha.0.norm_in.weight": (4,),
            "layer.layers.0.mha.0.norm_inter.bias": (4,),
            "layer.layers.0.mha.0.norm_inter.weight": (4,),
            "layer.layers.0.mha.0.proj_k.weight": (6, 4),
            "layer.layers.0.mha.0.proj_o.weight": (4, 6),
            "layer.layers.0.mha.0.proj_q.weight": (6, 4),
            "layer.layers.0.mha.0.proj_v.weight": (6, 4),
            "layer.layers.0.mha.1.ffn.0.bias": (6,),
            "layer.layers.0.mha.1.ffn.0.weight": (6, 4),
            "layer.layers.0.mha.1.ffn.3.bias": (4,),
            "layer.layers.0.mha.1.ffn.3.weight": (4, 6),
            "layer.layers.0.mha.1.norm_in.bias": (4,),
            "layer.layers.0.mha.1.norm_in.weight": (4,),
            "layer.layers.0.mha.1.norm_inter.bias": (4,),
            "layer.layers.0.mha.1.norm_inter.weight": (4,),
            "layer.layers.0.mha.1.proj_k.weight": (6, 4),
            "layer.layers.0.mha.1.proj_o.weight": (4, 6),
            "layer.layers.0.mha.1.proj_q.weight": (6, 4),
            "layer.layers.0.mha.1.proj_v.weight": (6, 4),
        },
        [-10.540833261910194, -0.2402772097946109, 6.485270060098516],
    ),
    "settransformerencoder-sab": (
        {
            "layer.layers.0.mha.ffn.0.bias": (6,),
            "layer.layers.0.mha.ffn.0.weight": (6, 4),
            "layer.layers.0.mha.ffn.3.bias": (4,),
            "layer.layers.0.mha.ffn.3.weight": (4, 6),
            "layer.layers.0.mha.norm_in.bias": (4,),
            "layer.layers.0.mha.norm_in.weight": (4,),
            "layer.layers.0.mha.norm_inter.bias": (4,),
            "layer.layers.0.mha.norm_inter.weight": (4,),
            "layer.layers.0.mha.proj_k.weight": (4, 4),
            "layer.layers.0.mha.proj_o.weight": (4, 4),
            "layer.layers.0.mha.proj_q.weight": (4, 4),
            "layer.layers.0.mha.proj_v.weight": (4, 4),
            "layer.layers.1.mha.ffn.0.bias": (6,),
            "layer.layers.1.mha.ffn.0.weight": (6, 4),
            "layer.layers.1.mha.ffn.3.bias": (4,),
            "layer.layers.1.mha.ffn.3.weight": (4, 6),
            "layer.layers.1.mha.norm_in.bias": (4,),
            "layer.layers.1.mha.norm_in.weight": (4,),
            "layer.layers.1.mha.norm_inter.bias": (4,),
            "layer.layers.1.mha.norm_inter.weight": (4,),
            "layer.layers.1.mha.proj_k.weight": (4, 4),
            "layer.layers.1.mha.proj_o.weight": (4, 4),
            "layer.layers.1.mha.proj_q.weight": (4, 4),
            "layer.layers.1.mha.proj_v.weight": (4, 4),
        },
        [7.679587043343723, -0.11088281551529366, 5.046808635771405],
    ),
    "spatialencoder": ({"embedding_table.weight": (4, 3)}, [-6.173106343210959, 2.931342106039538, 6.849704889073626]),
    "spatialencoder3d": (
        {
            "beta.weight": (9, 1),
            "gamma.weight": (9, 1),
            "linear_layer_1.bias": (4,),
            "linear_layer_1.weight": (4, 4),
            "linear_layer_2.bias": (2,),
            "linear_layer_2.weight": (2, 4),
            "means": (4,),
            "stds": (4,),
        },
        [-15.449757466188958, 3.9596660662115486, 23.623430457239774],
    ),
    "spatialencoder3d-untyped": (
        {
            "beta.weight": (203, 1),
            "gamma.weight": (203, 1),
            "linear_layer_1.bias": (3,),
            "linear_layer_1.weight": (3, 3),
            "linear_layer_2.bias": (1,),
            "linear_layer_2.weight": (1, 3),
            "means": (3,),
            "stds": (3,),
        },
        [-8.122961438532823, 0.0009276910081684464, 3.698099419137762],
    ),
    "transe": ({"rel_emb.weight": (3, 4)}, [-15.02904910891854, 2.2075311398386686, 40.06865226658263]),
    "transe-p2": ({"rel_emb.weight": (3, 4)}, [-8.38283412739541, 1.2782282801927929, 12.540606352078337]),
    "transr": (
        {"rel_emb.weight": (3, 2), "rel_project.weight": (3, 8)},
        [-8.170481503972647, -0.33483398273597387, 12.673781758517203],
    ),
    "twirlsconv": (
        {
            "layer.mlp_aft.layers.0.bias": (2,),
            "layer.mlp_aft.layers.0.weight": (2, 3),
            "layer.mlp_bef.layers.0.bias": (3,),
            "layer.mlp_bef.layers.0.weight": (3, 4),
        },
        [5.553385704755783, -0.26732943003827864, 2.653867768811886],
    ),
    "twirlsconv-attention": (
        {
            "layer.mlp_aft.layers.0.bias": (2,),
            "layer.mlp_aft.layers.0.weight": (2, 3),
            "layer.mlp_aft.norms.0.bias": (3,),
            "layer.mlp_aft.norms.0.weight": (3,),
            "layer.mlp_bef.layers.0.bias": (3,),
            "layer.mlp_bef.layers.0.weight": (3, 4),
            "layer.mlp_bef.layers.1.bias": (3,),
            "layer.mlp_bef.layers.1.weight": (3, 3),
            "layer.mlp_bef.norms.0.bias": (3,),
            "layer.mlp_bef.norms.0.weight": (3,),
            "layer.unfolding.etas": (3,),
        },
        [5.796981990337372, -0.01845618269660243, 2.8038513757119343],
    ),
    "twirlsconv-cached": (
        {
            "layer.mlp_aft.layers.0.bias": (3,),
            "layer.mlp_aft.layers.0.weight": (3, 4),
            "layer.mlp_aft.layers.1.bias": (2,),
            "layer.mlp_aft.layers.1.weight": (2, 3),
        },
        [10.013362407684326, 0.5983241688121448, 9.232511123450543],
    ),
    "twirlsconv-no-precond": (
        {"layer.mlp_bef.layers.0.bias": (2,), "layer.mlp_bef.layers.0.weight": (2, 4)},
        [6.446742974221706, 0.5982082113623619, 4.726628285696271],
    ),
}

# computed in float32 by DGL (LapPosEncoder casts its input; label propagation's labels are float32; TWIRLSConv
# starts its edge weights in the default dtype)
_FLOAT32 = ("lappos", "labelprop", "twirlsconv")


@functools.cache
def _cases():
    """gnnc's cases, built once (each test refills the parameters it uses)."""
    return cases(gnnc, gnnc.nn)


def _run(name):
    module, args, kwargs, passes_messages = _cases()[name]
    float32 = name.startswith(_FLOAT32)
    if not float32:
        module = module.double()
    module.eval()
    shapes, expected = EXPECTED[name]
    with torch.no_grad():
        assert fill(module) == shapes
    return module, args, kwargs, passes_messages, expected, (1e-5 if float32 else 1e-9)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_eager_matches_dgl(name):
    module, args, kwargs, _, expected, rel = _run(name)
    with torch.no_grad():
        assert figures(module(*args, **kwargs)) == pytest.approx(expected, rel=rel, abs=1e-6 * rel)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if _cases()[n][3]))
def test_compiled_matches_dgl(name):
    module, args, kwargs, _, expected, rel = _run(name)
    with warnings.catch_warnings(), recording() as plans, torch.no_grad():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = gnnc.compile(module)(*args, **kwargs)
    assert plans, "no compiled plan ran"
    assert figures(out) == pytest.approx(expected, rel=rel, abs=1e-6 * rel)


def test_dense_cheb_conv_finds_lambda_max_itself():
    """Without ``lambda_max`` it is the normalised Laplacian's largest eigenvalue (DGL 2.1 asks the removed
    ``torch.eig`` for it and fails on current torch)."""
    adj = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 0, 1], [1, 1, 0, 0]], dtype=torch.float64)
    d = np.diag(1 / np.sqrt(adj.sum(1).numpy()))
    lambda_max = np.linalg.eigvals(np.eye(4) - d @ adj.numpy() @ d).real.max()
    conv = gnnc.nn.DenseChebConv(3, 2, 3).double()
    feat = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(conv(adj, feat), conv(adj, feat, lambda_max=float(lambda_max)))


def test_dense_sage_conv_refuses_pairs_of_other_widths():
    with pytest.raises(ValueError, match="same feature shape"):
        gnnc.nn.DenseSAGEConv(4, 2)(torch.ones(3, 4), (torch.ones(4, 4), torch.ones(3, 5)))


def test_block_adjacency_is_destinations_by_sources():
    """A block's ``adj_external`` is ``[sources, destinations]`` as DGL's (``DenseGraphConv`` on a block's
    matrix is ``GraphConv`` on the block); DGL 2.1's matrix, recorded."""
    g = gnnc.graph((torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 0, 2, 1])))
    block = gnnc.to_block(g, torch.tensor([0, 1, 2]))
    assert block.adj_external(transpose=True).to_dense().tolist() == [
        [0.0, 0.0, 1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0, 1.0],
        [0.0, 1.0, 0.0, 1.0, 0.0],
    ]
    conv = gnnc.nn.GraphConv(4, 2)
    dense = gnnc.nn.DenseGraphConv(4, 2)
    dense.load_state_dict(conv.state_dict())
    feat = torch.randn(5, 4)
    torch.testing.assert_close(dense(block.adj_external(transpose=True).to_dense(), feat), conv(block, feat))


def test_group_rev_res_keeps_its_input_and_has_gradients():
    """DGL frees the input's storage until the backward pass; gnnc's input stays readable, and gradients
    reach every group's copy of the layer."""
    g = gnnc.graph((torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0])))
    h = torch.randn(4, 6, requires_grad=True)
    kept = h.detach().clone()
    model = gnnc.nn.GroupRevRes(gnnc.nn.GraphConv(2, 2), 3)
    model(g, h).square().sum().backward()
    assert torch.equal(h.detach(), kept) and h.grad.shape == (4, 6)
    assert all(m.weight.grad is not None and m.weight.grad.abs().sum() > 0 for m in model.gnn_modules)
