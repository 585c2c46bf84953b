"""Models from DGL's tutorials and examples, written as DGL users write them, and PyG layers ported to
UDFs as PyG users port them (``tests/pyg_port_examples.py``): compiled == eager.

The models (``tests/dgl_examples.py``) keep their users' style: bound methods,
module-level functions, lambdas, closures, partials, ModuleDicts keyed by
edge type, built-ins next to UDFs. Each runs eagerly and through
``gnnc.compile`` in float64 on random graphs with zero in-degree nodes, self
loops, multi-edges and unsorted edges (the heterograph of several relations
also has an empty relation and a one-node type). Outputs and the gradients of
the inputs and of every parameter must agree, before and after each of two
SGD steps, and every compiled call must run a compiled plan, never fall back.
"""

import copy
import warnings

import pytest
import torch

import gnnc
from gnnc.compiler.driver import recording
from tests import dgl_examples as models
from tests import pyg_port_examples as pyg
from tests.graphs import random_heterograph, random_homograph

NUM_NODES = 40
SGD_STEPS = 2


def homograph():
    return random_homograph(NUM_NODES, 120, seed=0)


def heterograph():
    return random_heterograph(seed=0)


def user_game_graph():
    """One relation 'plays' (user -> game), unsorted, with multi-edges; the last two games receive nothing."""
    gen = torch.Generator().manual_seed(4)
    users, games = torch.randint(0, 15, (50,), generator=gen), torch.randint(0, 8, (50,), generator=gen)
    return gnnc.heterograph(
        {("user", "plays", "game"): (torch.cat([users, users[:3]]), torch.cat([games, games[:3]]))},
        {"user": 15, "game": 10},
    )


def _random_leaf(gen, *shape):
    return torch.randn(*shape, generator=gen).requires_grad_()


def node_features(g):
    return [_random_leaf(torch.Generator().manual_seed(1), g.num_nodes(), models.IN_DIM)]


def node_and_edge_features(edge_dim):
    def make(g):
        gen = torch.Generator().manual_seed(1)
        return [_random_leaf(gen, g.num_nodes(), models.IN_DIM), _random_leaf(gen, g.num_edges(), edge_dim)]

    return make


def node_features_and_edge_weights(g):
    """[E, 1] edge weights that take no gradient."""
    gen = torch.Generator().manual_seed(1)
    return [_random_leaf(gen, g.num_nodes(), models.IN_DIM), torch.rand(g.num_edges(), 1, generator=gen)]


def node_features_and_1d_edge_weights(g):
    gen = torch.Generator().manual_seed(1)
    weights = torch.rand(g.num_edges(), generator=gen) + 0.1
    return [_random_leaf(gen, g.num_nodes(), models.IN_DIM), weights.requires_grad_()]


def node_features_and_negative_graph(g):
    gen = torch.Generator().manual_seed(7)
    negative = gnnc.graph(
        (torch.randint(0, NUM_NODES, (80,), generator=gen), torch.randint(0, NUM_NODES, (80,), generator=gen)),
        num_nodes=NUM_NODES,
    )
    return node_features(g) + [negative]


def typed_node_features(g):
    gen = torch.Generator().manual_seed(3)
    return [{t: _random_leaf(gen, g.num_nodes(t), models.HETERO_DIM) for t in g.ntypes}]


def user_game_features(g):
    gen = torch.Generator().manual_seed(5)
    return [
        _random_leaf(gen, g.num_nodes("user"), models.HETERO_DIM),
        _random_leaf(gen, g.num_nodes("game"), models.HETERO_DIM),
        torch.rand(g.num_edges(), 1, generator=gen).requires_grad_(),
    ]


# test id -> (make the graph, make the model on that graph, make the inputs on that graph)
EXAMPLES = {
    "GatedGCN_udf": (homograph, lambda g: models.GatedGCNNet(), node_and_edge_features(models.IN_DIM)),
    "GatedGCN_builtin": (homograph, lambda g: models.GatedGCNBuiltin(), node_and_edge_features(models.IN_DIM)),
    "MoNet_GMM": (homograph, lambda g: models.MoNet(), node_features),
    "EdgeConv_DGCNN": (homograph, lambda g: models.DGCNN(), node_features),
    "GCNII": (homograph, lambda g: models.GCNII(), node_features_and_edge_weights),
    "APPNP_edge_dropout_lambda": (homograph, lambda g: models.APPNP(), node_features),
    "APPNP_teleport_in_apply_node_func": (homograph, lambda g: models.APPNPApplyNodeFunc(), node_features),
    "TAGConv_SGC": (homograph, lambda g: models.TAGNet(), node_features),
    "AGNN": (homograph, lambda g: models.AGNN(), node_features),
    "GraphTransformer": (homograph, lambda g: models.GraphTransformer(), node_features),
    "NNConv_MPNN": (homograph, lambda g: models.MPNN(), node_and_edge_features(3)),
    "PNA": (homograph, lambda g: models.PNA(), node_features),
    "GINE": (homograph, lambda g: models.GINE(), node_and_edge_features(models.IN_DIM)),
    "GraphSAGE_pool_gcn_min": (homograph, lambda g: models.GraphSAGE(), node_features),
    "ChebConv": (homograph, lambda g: models.Cheb(), node_features),
    "LinkPrediction_dot_mlp": (homograph, lambda g: models.LinkPrediction(), node_features_and_negative_graph),
    "EdgeUpdate_where_clamp": (homograph, lambda g: models.EdgeUpdate(), node_and_edge_features(models.IN_DIM)),
    "GraphConv_EdgeWeightNorm": (homograph, lambda g: models.WeightedGCN(), node_features_and_1d_edge_weights),
    "DotGAT": (homograph, lambda g: models.DotGAT(), node_features),
    "GATv2": (homograph, lambda g: models.GATv2(), node_features),
    "HeteroRGCN_multi_update_all": (heterograph, models.HeteroRGCN, typed_node_features),
    "HeteroMLPPredictor": (heterograph, lambda g: models.HeteroMLPPredictor(models.HETERO_DIM, 3), typed_node_features),
    "HeteroAttention_stack_min": (heterograph, models.HeteroAttentionNet, typed_node_features),
    "HeteroGCN_stack_semantic_attention": (heterograph, models.HeteroGCNSemanticAttention, typed_node_features),
    "BipartiteSAGE_srcdata_dstdata": (user_game_graph, lambda g: models.BipartiteSAGE(), user_game_features),
    "PyG_GENConv_learned_temperature": (homograph, lambda g: pyg.GENConv(), node_and_edge_features(models.IN_DIM)),
    "PyG_PowerMean_learned_p": (homograph, lambda g: pyg.PowerMeanConv(), node_features),
    "PyG_PointNetConv": (homograph, lambda g: pyg.PointNetConv(), node_features),
    "PyG_GatedGraphConv_GRUCell_update": (homograph, lambda g: pyg.GatedGraphConv(), node_features),
    "PyG_FiLMConv_split": (homograph, lambda g: pyg.FiLMConv(), node_features),
    "PyG_TransformerConv_heads_beta": (homograph, lambda g: pyg.TransformerConv(), node_features),
    "PyG_learned_teleport_1_minus_alpha": (homograph, lambda g: pyg.LearnedTeleport(), node_features),
    "PyG_LEConv": (homograph, lambda g: pyg.LEConv(), node_and_edge_features(models.IN_DIM)),
    "PyG_gated_std_min_aggregators": (homograph, lambda g: pyg.GatedAttentionReadout(), node_features),
}


@pytest.fixture(autouse=True)
def float64_by_default():
    """The models make tensors (parameters, labels, edge weights) in the default dtype, as user code does."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _tensors(value):
    """The tensors in a model's inputs or outputs, in a fixed order (dicts by key); graphs are skipped."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in _tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _loss(outputs):
    """Weights every output element differently, so a swapped row or column changes the gradients."""
    total = 0
    for i, out in enumerate(outputs):
        weights = torch.linspace(-1.3, 0.7 + i, out.numel(), dtype=out.dtype).view_as(out)
        total = total + (out * weights).sum() + 0.1 * out.pow(2).sum()
    return total


def _outputs_and_gradients(module, call, make_graph, make_inputs):
    """``call(graph, *inputs)`` on a fresh graph: its outputs, and the loss's gradients w.r.t. the inputs and
    every parameter of ``module`` (zeros where one is unused), by name."""
    graph = make_graph()
    inputs = make_inputs(graph)
    leaves = [t for t in _tensors(inputs) if t.requires_grad]
    wrt = {f"input {i}": t for i, t in enumerate(leaves)} | dict(module.named_parameters())
    outputs = _tensors(call(graph, *inputs))
    grads = torch.autograd.grad(_loss(outputs), list(wrt.values()), allow_unused=True)
    return [o.detach() for o in outputs], {
        name: torch.zeros_like(t) if g is None else g for (name, t), g in zip(wrt.items(), grads)
    }


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_compiled_model_matches_eager(name):
    make_graph, make_model, make_inputs = EXAMPLES[name]
    with torch.random.fork_rng(devices=[]):  # the model's initialization, reproducibly
        torch.manual_seed(0)
        eager = make_model(make_graph()).eval()
    model = copy.deepcopy(eager)
    compiled = gnnc.compile(model)
    eager_sgd = torch.optim.SGD(eager.parameters(), lr=0.05)
    compiled_sgd = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(SGD_STEPS + 1):
        expected, expected_grads = _outputs_and_gradients(eager, eager, make_graph, make_inputs)
        with warnings.catch_warnings(), recording() as plans:
            warnings.simplefilter("error", gnnc.FallbackWarning)
            actual, actual_grads = _outputs_and_gradients(model, compiled, make_graph, make_inputs)
        assert any(plan.dfg is not None for plan in plans), "no call ran a compiled plan"
        assert len(actual) == len(expected)
        for i, (a, e) in enumerate(zip(actual, expected)):
            torch.testing.assert_close(a, e, msg=lambda m: f"after {step} SGD steps, output {i}: {m}")
        for key, e in expected_grads.items():
            torch.testing.assert_close(
                actual_grads[key], e, msg=lambda m: f"after {step} SGD steps, gradient of {key}: {m}"
            )
        if step < SGD_STEPS:
            for sgd, module, grads in ((eager_sgd, eager, expected_grads), (compiled_sgd, model, actual_grads)):
                for param_name, param in module.named_parameters():
                    param.grad = grads[param_name]
                sgd.step()
