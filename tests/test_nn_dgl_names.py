"""``gnnc.nn``'s DGL layers against DGL 2.1: parameter names and shapes as DGL's state dicts hold them, and
the numbers DGL computes, eagerly and compiled.

``EXPECTED`` was recorded by running ``cases`` (the section between the markers, which imports nothing of
gnnc) with DGL 2.1 itself: ``G`` ``dgl``, ``nn`` ``dgl.nn.pytorch``. Every case fills its parameters from
their names in sorted order, so a parameter gnnc named or shaped otherwise changes the names or the numbers.
The figures are the output's sum, a position-weighted sum and its sum of squares (float64).
"""

import importlib
import warnings

import pytest
import torch

import gnnc
import gnnc.nn
from gnnc.compat import dgl as alias
from gnnc.compiler.driver import recording


# --- cases: DGL-agnostic (run by DGL 2.1 to record EXPECTED) ---
def cases(G, nn):
    """name -> (module, graph, positional inputs, keyword inputs); ``G`` is gnnc or dgl, ``nn`` its layers."""
    F = torch.nn.functional

    def homo():  # 6 nodes, each with an in-edge; a multi-edge 1->1 self loop
        return G.graph((torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 1, 1]), torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 1, 1])))

    def bipartite():
        return G.heterograph(
            {("u", "r", "v"): (torch.tensor([0, 1, 2, 3, 3, 0]), torch.tensor([0, 0, 1, 2, 1, 2]))}, {"u": 4, "v": 3}
        )

    def hetero():
        return G.heterograph(
            {
                ("user", "follows", "user"): (torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])),
                ("user", "plays", "game"): (torch.tensor([0, 1, 2, 0]), torch.tensor([0, 0, 1, 1])),
                ("store", "sells", "game"): (torch.tensor([0, 1]), torch.tensor([1, 0])),
            },
            {"user": 3, "game": 2, "store": 2},
        )

    def x(rows, width=4, shift=0.0):
        return torch.arange(rows * width, dtype=torch.float64).add(shift).sin().view(rows, width)

    class Call(torch.nn.Module):
        """A module around a callable without parameters (the readouts, ``edge_softmax``, EdgeWeightNorm)."""

        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, g, *args):
            return self.fn(g, *args)

    class Flat(torch.nn.Module):
        """HeteroGraphConv's dict output as one tensor, types in sorted order."""

        def __init__(self, conv):
            super().__init__()
            self.conv = conv

        def forward(self, g, inputs):
            out = self.conv(g, inputs)
            return torch.cat([out[k].reshape(-1) for k in sorted(out)])

    g, b = homo(), bipartite()
    block = G.to_block(G.in_subgraph(g, torch.tensor([0, 1, 2])), torch.tensor([0, 1, 2]))
    weight = torch.tensor([0.5, 1.5, 1.0, 2.0, 0.25, 1.0, 3.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    types = torch.tensor([0, 1, 2, 0, 1, 2, 2, 1, 0, 0])
    batch = G.batch(
        [
            G.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))),
            G.graph((torch.tensor([0, 1]), torch.tensor([1, 0]))),
        ]
    )
    out = {
        f"graphconv-{norm}-{wide}": (nn.GraphConv(*wide, norm=norm, activation=F.relu), g, (x(6, wide[0]),), {})
        for norm in ("both", "left", "right", "none")
        for wide in ((4, 2), (2, 4))
    }
    out.update(
        {
            "graphconv-edge-weight": (nn.GraphConv(4, 2), g, (x(6),), {"edge_weight": weight}),
            "graphconv-bipartite": (nn.GraphConv(4, 2, allow_zero_in_degree=True), b, ((x(4), x(3, shift=1)),), {}),
            "gatconv": (nn.GATConv(4, 2, 2, residual=True, activation=F.elu), g, (x(6),), {"get_attention": True}),
            "graphconv-block": (nn.GraphConv(4, 2), block, (x(block.num_src_nodes()),), {}),
            "gatconv-block": (nn.GATConv(4, 2, 2, residual=True), block, (x(block.num_src_nodes()),), {}),
            "sageconv-gcn-block": (nn.SAGEConv(4, 2, "gcn"), block, (x(block.num_src_nodes()),), {}),
            "gatconv-bipartite": (nn.GATConv((4, 3), 2, 2, residual=True), b, ((x(4), x(3, 3)),), {}),
            "gatv2conv": (nn.GATv2Conv(4, 2, 2, residual=True), g, (x(6),), {"get_attention": True}),
            "ginconv": (nn.GINConv(torch.nn.Linear(4, 2), "mean", init_eps=0.5, learn_eps=True), g, (x(6),), {}),
            "ginconv-edge-weight": (nn.GINConv(None, "max"), g, (x(6),), {"edge_weight": weight.view(-1, 1)}),
            "relgraphconv": (nn.RelGraphConv(4, 2, 3, activation=F.relu), g, (x(6), types), {}),
            "relgraphconv-basis": (
                nn.RelGraphConv(4, 2, 3, "basis", 2, layer_norm=True),
                g,
                (x(6), types),
                {"norm": weight.view(-1, 1)},
            ),
            "relgraphconv-bdd": (nn.RelGraphConv(4, 2, 3, "bdd", 2, self_loop=False), g, (x(6), types), {}),
            "appnpconv": (nn.APPNPConv(3, 0.2), g, (x(6),), {}),
            "appnpconv-edge-weight": (nn.APPNPConv(2, 0.1), g, (x(6),), {"edge_weight": weight}),
            "sgconv": (nn.SGConv(4, 2, k=2), g, (x(6),), {}),
            "tagconv": (nn.TAGConv(4, 2, k=2), g, (x(6),), {"edge_weight": weight}),
            "chebconv": (nn.ChebConv(4, 2, 3), g, (x(6),), {"lambda_max": [1.5]}),
            "edgeconv": (nn.EdgeConv(4, 2), g, (x(6),), {}),
            "edge-weight-norm": (Call(nn.EdgeWeightNorm("both")), g, (weight,), {}),
            "edge-softmax": (Call(nn.edge_softmax), g, (x(10, 2).view(10, 2, 1),), {}),
            "heterographconv": (
                Flat(
                    nn.HeteroGraphConv(
                        {
                            "follows": nn.GraphConv(4, 2),
                            "plays": nn.SAGEConv(4, 2, "pool"),
                            "sells": nn.GraphConv(4, 2, norm="right"),
                        },
                        "mean",
                    )
                ),
                hetero(),
                ({"user": x(3), "game": x(2, shift=1), "store": x(2, shift=2)},),
                {},
            ),
            "sumpooling": (nn.SumPooling(), batch, (x(5),), {}),
            "avgpooling": (nn.AvgPooling(), batch, (x(5),), {}),
            "maxpooling": (nn.MaxPooling(), batch, (x(5),), {}),
            "sortpooling": (nn.SortPooling(2), batch, (x(5),), {}),
            "globalattentionpooling": (
                nn.GlobalAttentionPooling(torch.nn.Linear(4, 1), torch.nn.Linear(4, 2)),
                batch,
                (x(5),),
                {},
            ),
            "set2set": (nn.Set2Set(4, 2, 1), batch, (x(5),), {}),
        }
    )
    out.update(
        {
            f"sageconv-{agg}": (nn.SAGEConv(4, 2, agg, activation=F.relu), g, (x(6),), {})
            for agg in ("mean", "gcn", "pool", "lstm")
        }
    )
    return out


def fill(module):
    """Every parameter and float buffer, by sorted name, from one deterministic sequence."""
    state = module.state_dict()
    start = 0
    for name in sorted(state):
        value = state[name]
        if value.is_floating_point():
            n = value.numel()
            value.copy_(torch.arange(start, start + n, dtype=torch.float64).mul(0.37).cos().mul(0.5).view(value.shape))
            start += n
    return {name: tuple(value.shape) for name, value in sorted(state.items())}


def figures(out):
    """(sum, position-weighted sum, sum of squares) of every tensor of ``out``."""
    flat = torch.cat([t.reshape(-1) for t in (out if isinstance(out, tuple) else (out,))]).double()
    return [
        flat.sum().item(),
        (flat * torch.linspace(-1, 1, flat.numel(), dtype=torch.float64)).sum().item(),
        flat.square().sum().item(),
    ]


# --- end of cases ---


# recorded with DGL 2.1.0 (torch 2.2.1, float64): name -> (parameter shapes by name, figures)
EXPECTED = {
    "appnpconv": ({}, [0.6255930710020825, -0.0716115631374929, 0.6306203318715485]),
    "appnpconv-edge-weight": ({}, [0.5166550865924996, 1.9446689762680833, 2.6332200994211843]),
    "avgpooling": ({}, [-0.025894710598473925, 0.16046273098654534, 0.43859765627545066]),
    "chebconv": (
        {"linear.bias": (2,), "linear.weight": (2, 12)},
        [10.733222494818365, -2.723239149993623, 21.780578052189664],
    ),
    "edge-softmax": ({}, [12.0, -1.5362838250698077, 9.013912477992346]),
    "edge-weight-norm": ({}, [5.734923164247016, 0.12400264145594356, 4.036281179138323]),
    "edgeconv": (
        {"phi.bias": (2,), "phi.weight": (2, 4), "theta.bias": (2,), "theta.weight": (2, 4)},
        [3.5362258946931755, 0.696195166211167, 8.582588104677571],
    ),
    "gatconv": (
        {"attn_l": (1, 2, 2), "attn_r": (1, 2, 2), "bias": (4,), "fc.weight": (4, 4)},
        [8.327505005770599, 7.070410657047273, 17.368271714254895],
    ),
    "gatconv-bipartite": (
        {
            "attn_l": (1, 2, 2),
            "attn_r": (1, 2, 2),
            "fc_dst.weight": (4, 3),
            "fc_src.weight": (4, 4),
            "res_fc.bias": (4,),
            "res_fc.weight": (4, 3),
        },
        [1.5539887317014685, 0.6413316311934507, 7.769624545190655],
    ),
    "gatconv-block": (
        {"attn_l": (1, 2, 2), "attn_r": (1, 2, 2), "bias": (4,), "fc.weight": (4, 4)},
        [-4.653943485244911, -1.9875986324281398, 9.269997699982842],
    ),
    "gatv2conv": (
        {"attn": (1, 2, 2), "fc_dst.bias": (4,), "fc_dst.weight": (4, 4), "fc_src.bias": (4,), "fc_src.weight": (4, 4)},
        [2.342279259897552, 10.139115849830505, 27.952164440098358],
    ),
    "ginconv": (
        {"apply_func.bias": (2,), "apply_func.weight": (2, 4), "eps": (1,)},
        [5.4708891350770354, 0.3442092713038456, 5.920382808262351],
    ),
    "ginconv-edge-weight": ({"eps": (1,)}, [12.81082478082656, 0.706504291778129, 60.226041953943565]),
    "globalattentionpooling": (
        {"feat_nn.bias": (2,), "feat_nn.weight": (2, 4), "gate_nn.bias": (1,), "gate_nn.weight": (1, 4)},
        [1.4943485310367068, -0.017718859182748847, 0.5893254658314288],
    ),
    "graphconv-bipartite": (
        {"bias": (2,), "weight": (4, 2)},
        [1.0985442460649169, -0.30728801808953177, 1.1841344360673176],
    ),
    "graphconv-block": (
        {"bias": (2,), "weight": (4, 2)},
        [-0.3224065236480637, 1.0082187575998145, 0.4350232844777245],
    ),
    "graphconv-both-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.453983233214702, -1.7960582238769316, 5.871004913790599],
    ),
    "graphconv-both-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [6.487971479606013, 0.01568113878763211, 6.230797759163702],
    ),
    "graphconv-edge-weight": (
        {"bias": (2,), "weight": (4, 2)},
        [2.1727280814118575, -2.0285453105617037, 7.245253133245792],
    ),
    "graphconv-left-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.16676410762996, -2.1608948373379886, 5.676967096682298],
    ),
    "graphconv-left-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [6.723481059644824, 0.09027044091135661, 6.553790838249999],
    ),
    "graphconv-none-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.86347097532497, -0.7895079224414592, 6.785908038809531],
    ),
    "graphconv-none-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [7.717643218547047, 1.1438853591505014, 9.964396577963575],
    ),
    "graphconv-right-(2, 4)": (
        {"bias": (4,), "weight": (2, 4)},
        [9.620853110195268, -1.5220687692440593, 6.052079996218048],
    ),
    "graphconv-right-(4, 2)": (
        {"bias": (2,), "weight": (4, 2)},
        [6.210764910032004, -0.026993910770814145, 6.007665070325191],
    ),
    "heterographconv": (
        {
            "conv.mods.follows.bias": (2,),
            "conv.mods.follows.weight": (4, 2),
            "conv.mods.plays.fc_neigh.weight": (2, 4),
            "conv.mods.plays.fc_pool.bias": (4,),
            "conv.mods.plays.fc_pool.weight": (4, 4),
            "conv.mods.plays.fc_self.bias": (2,),
            "conv.mods.plays.fc_self.weight": (2, 4),
            "conv.mods.sells.bias": (2,),
            "conv.mods.sells.weight": (4, 2),
        },
        [5.199343799576008, 0.20513032318409286, 5.43825788324392],
    ),
    "maxpooling": ({}, [5.170272172989312, -0.5771560108871374, 4.608962226558569]),
    "relgraphconv": (
        {"h_bias": (2,), "linear_r.W": (3, 4, 2), "loop_weight": (4, 2)},
        [7.052695140389709, -1.816349080001595, 11.354229136529831],
    ),
    "relgraphconv-basis": (
        {
            "h_bias": (2,),
            "layer_norm_weight.bias": (2,),
            "layer_norm_weight.weight": (2,),
            "linear_r.W": (2, 4, 2),
            "linear_r.coeff": (3, 2),
            "loop_weight": (4, 2),
        },
        [9.18630866528927, -1.7579148657896346, 12.576311922058437],
    ),
    "relgraphconv-bdd": (
        {"h_bias": (2,), "linear_r.W": (3, 4)},
        [4.62904605860119, 1.9861636793816349, 4.886827934825091],
    ),
    "sageconv-gcn": (
        {"bias": (2,), "fc_neigh.weight": (2, 4)},
        [5.867761656985344, 0.38397286547704046, 4.079799668308539],
    ),
    "sageconv-gcn-block": (
        {"bias": (2,), "fc_neigh.weight": (2, 4)},
        [2.1597926447396874, 0.9226221793218853, 1.7152018149646349],
    ),
    "sageconv-lstm": (
        {
            "fc_neigh.weight": (2, 4),
            "fc_self.bias": (2,),
            "fc_self.weight": (2, 4),
            "lstm.bias_hh_l0": (16,),
            "lstm.bias_ih_l0": (16,),
            "lstm.weight_hh_l0": (16, 4),
            "lstm.weight_ih_l0": (16, 4),
        },
        [0.8797479225131564, -0.20361770785093908, 0.3891943075909553],
    ),
    "sageconv-mean": (
        {"fc_neigh.weight": (2, 4), "fc_self.bias": (2,), "fc_self.weight": (2, 4)},
        [1.5150785223631213, -0.1463426292605765, 0.7411660388325656],
    ),
    "sageconv-pool": (
        {
            "fc_neigh.weight": (2, 4),
            "fc_pool.bias": (4,),
            "fc_pool.weight": (4, 4),
            "fc_self.bias": (2,),
            "fc_self.weight": (2, 4),
        },
        [2.0413700393695144, -0.5052252652165563, 1.0490924797658714],
    ),
    "set2set": (
        {
            "lstm.bias_hh_l0": (16,),
            "lstm.bias_ih_l0": (16,),
            "lstm.weight_hh_l0": (16, 4),
            "lstm.weight_ih_l0": (16, 8),
        },
        [-2.9814993275917976, 0.24736224237531573, 1.0983991105466258],
    ),
    "sgconv": ({"fc.bias": (2,), "fc.weight": (2, 4)}, [5.713108628653657, -0.9196370756478123, 3.5341102536550886]),
    "sortpooling": ({}, [1.4234323031433578, -0.20020757793153024, 7.461667377019744]),
    "sumpooling": ({}, [0.08527663369215455, 0.17059617199304977, 1.8594121932804255]),
    "tagconv": ({"lin.bias": (2,), "lin.weight": (2, 12)}, [5.994444292502597, -1.9290427941697574, 19.09984694469175]),
}


def _run(name):
    module, g, args, kwargs = cases(gnnc, gnnc.nn)[name]
    module = module.double()
    shapes, expected = EXPECTED[name]
    with torch.no_grad():
        assert fill(module) == shapes
    return module, g, args, kwargs, expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_eager_matches_dgl(name):
    module, g, args, kwargs, expected = _run(name)
    assert figures(module(g, *args, **kwargs)) == pytest.approx(expected, rel=1e-9, abs=1e-12)


# the readouts and edge_softmax run no message passing of their own: nothing to compile
_NO_PLAN = {
    "sumpooling",
    "avgpooling",
    "maxpooling",
    "sortpooling",
    "globalattentionpooling",
    "set2set",
    "edge-softmax",
}


@pytest.mark.parametrize("name", sorted(set(EXPECTED) - _NO_PLAN))
def test_compiled_matches_dgl(name):
    module, g, args, kwargs, expected = _run(name)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = gnnc.compile(module)(g, *args, **kwargs)
    assert plans, "no compiled plan ran"
    assert figures(out) == pytest.approx(expected, rel=1e-9, abs=1e-12)


# (module real DGL code imports from, name, what it must be): the imports the world-code layer files stopped at,
# and the modules DGL's code imports gnnc.nn's other layers from
DGL_IMPORTS = [
    ("dgl.nn", "GraphConv", gnnc.nn.GraphConv),
    ("dgl.nn.functional", "edge_softmax", gnnc.ops.edge_softmax),
    ("dgl.nn.pytorch", "GATConv", gnnc.nn.GATConv),
    ("dgl.nn.pytorch", "SAGEConv", gnnc.nn.SAGEConv),
    ("dgl.nn.pytorch.conv", "RelGraphConv", gnnc.nn.RelGraphConv),
    ("dgl.nn.pytorch.glob", "AvgPooling", gnnc.nn.AvgPooling),
    ("dgl.nn.pytorch.glob", "SetTransformerEncoder", gnnc.nn.SetTransformerEncoder),
    ("dgl.nn.pytorch.utils", "Identity", gnnc.nn.Identity),
    ("dgl.nn.pytorch.utils", "JumpingKnowledge", gnnc.nn.JumpingKnowledge),
    ("dgl.nn.pytorch.utils", "LabelPropagation", gnnc.nn.LabelPropagation),
    ("dgl.nn.pytorch.utils", "Sequential", gnnc.nn.Sequential),
    ("dgl.nn.pytorch.factory", "RadiusGraph", gnnc.nn.RadiusGraph),
    ("dgl.nn.pytorch.gt", "BiasedMHA", gnnc.nn.BiasedMHA),
    ("dgl.nn.pytorch.gt", "SpatialEncoder3d", gnnc.nn.SpatialEncoder3d),
    ("dgl.nn.pytorch.hetero", "HeteroLinear", gnnc.nn.HeteroLinear),
    ("dgl.nn.pytorch.link", "EdgePredictor", gnnc.nn.EdgePredictor),
    ("dgl.nn.pytorch.link", "TransR", gnnc.nn.TransR),
]


@pytest.mark.parametrize("module, name, ours", DGL_IMPORTS, ids=[f"{m}.{n}" for m, n, _ in DGL_IMPORTS])
def test_dgl_import_paths_resolve_to_gnnc_nn(module, name, ours):
    alias.install()
    try:  # ``dgl`` exists only while the alias is installed (uninstall removes every dgl module)
        found = getattr(importlib.import_module(module), name)
    finally:
        alias.uninstall()
    assert found is ours


@pytest.mark.parametrize(
    "make",
    [
        lambda: gnnc.nn.GraphConv(4, 2),
        lambda: gnnc.nn.GATConv(4, 2, 1),
        lambda: gnnc.nn.GATv2Conv(4, 2, 1),
        lambda: gnnc.nn.EdgeConv(4, 2),
        lambda: gnnc.nn.SGConv(4, 2),
    ],
)
def test_zero_in_degree_refused_as_dgl_does(make):
    """DGL raises its DGLError (gnnc's ValueError) unless ``allow_zero_in_degree``; then the node gets a row."""
    g = gnnc.graph((torch.tensor([0, 1]), torch.tensor([1, 2])))  # node 0 has no in-edge
    x = torch.randn(3, 4)
    layer = make()
    with pytest.raises(ValueError, match="0-in-degree nodes"):
        layer(g, x)
    layer.set_allow_zero_in_degree(True)
    assert layer(g, x).shape[0] == 3
