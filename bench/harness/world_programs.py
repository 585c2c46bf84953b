"""The world's layer code as ``bench/world_code.py`` runs it: which file, how its constructor is wired, and
the graph and inputs it gets (runs in both interpreters: imports only numpy and torch).

A ``Program`` names a file under ``../shared/world-code`` (imported unchanged), the module name to import
it by and the folder that goes first on ``sys.path`` (files import their siblings by plain name), a
stand-in folder from ``world_stubs`` when the file imports a helper the folder lacks,
``build(module, graph, width)`` (the constructor call, every dropout 0) and ``inputs(dgl, rng, shape)`` ->
``(graph, tensors, run)`` where ``run(model, graph, tensors)`` is the forward call and returns a tensor or a
tuple of them. The graph and inputs come from a seeded ``numpy.random.RandomState`` and a ``Shape`` (the
small random test graph, or given edges), so both interpreters build the same ones; the float inputs are
float64 and take part in the gradient check; tensors the inputs make themselves take torch's default dtype,
which the worker sets to the program's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

N = 30  # nodes of the homogeneous test graph
D = 8  # feature width of the test shape
ZERO_IN_DEGREE = 4  # the last nodes receive no edges


@dataclass(frozen=True)
class Program:
    name: str
    project: str
    file: str  # relative to the world-code folder
    module: str
    path: str  # relative to the world-code folder: first on sys.path
    build: Callable
    inputs: Callable
    stubs: str | None = None  # a world_stubs folder, put on sys.path too
    dtype: torch.dtype = torch.float64  # float32 where the layer makes float32 tensors itself (``.float()``)


def edges(rng, n=N, m=100, zero_in_degree=ZERO_IN_DEGREE, self_loops=False):
    """Random edges with multi-edges, a few self loops and ``zero_in_degree`` nodes nothing points to
    (``self_loops=True``: a self loop on every node, so none has zero in-degree)."""
    src = rng.randint(0, n, m)
    dst = rng.randint(0, n - zero_in_degree, m)
    src, dst = np.concatenate([src, src[:5], [1, 2, 3]]), np.concatenate([dst, dst[:5], [1, 2, 3]])
    if self_loops:
        src, dst = np.concatenate([src, np.arange(n)]), np.concatenate([dst, np.arange(n)])
    return torch.from_numpy(src).long(), torch.from_numpy(dst).long()


@dataclass(frozen=True, eq=False)
class Shape:
    """The homogeneous graph and the feature width a program runs on: ``edges``'s random test graph, or the
    given ``src``/``dst`` (``bench/zoo.py``'s power-law graph). Graphs of other kinds (relations, trees,
    users and items) keep their own small structure and take only the width."""

    nodes: int = N
    width: int = D
    src: np.ndarray | None = None
    dst: np.ndarray | None = None

    def edges(self, rng, self_loops=False):
        """``(src, dst)``; ``self_loops=True`` adds one on every node."""
        if self.src is None:
            return edges(rng, self.nodes, self_loops=self_loops)
        src, dst = self.src, self.dst
        if self_loops:
            src, dst = np.concatenate([src, np.arange(self.nodes)]), np.concatenate([dst, np.arange(self.nodes)])
        return torch.from_numpy(src).long(), torch.from_numpy(dst).long()


TEST = Shape()


def floats(rng, *shape):
    return torch.from_numpy(rng.randn(*shape)).double().requires_grad_()


def homogeneous(dgl, rng, shape, self_loops=False):
    return dgl.graph(shape.edges(rng, self_loops), num_nodes=shape.nodes)


def node_input(run=lambda model, g, x: model(g, x["h"]), self_loops=False):
    """Inputs of a layer called ``model(g, h)``."""

    def inputs(dgl, rng, shape):
        g = homogeneous(dgl, rng, shape, self_loops)
        return g, {"h": floats(rng, shape.nodes, shape.width)}, run

    return inputs


def node_edge_input(edge_width=None, run=lambda model, g, x: model(g, x["h"], x["e"])):
    """Inputs of a layer called ``model(g, h, e)`` with edge features ``edge_width`` wide (default the
    shape's width)."""

    def inputs(dgl, rng, shape):
        g = homogeneous(dgl, rng, shape)
        e = floats(rng, g.num_edges(), edge_width or shape.width)
        return g, {"h": floats(rng, shape.nodes, shape.width), "e": e}, run

    return inputs


BGNN = "benchmarking-gnns/layers"
GT = "graphtransformer/layers"
EX = "dgl/examples/pytorch"


def bgnn(name, file, build, inputs):
    return Program(name, "benchmarking-gnns", f"{BGNN}/{file}.py", file, BGNN, build, inputs)


def graphtransformer(name, file, inputs):
    def build(m, g, d):
        return m.GraphTransformerLayer(d, d, 2, dropout=0.0, layer_norm=True, batch_norm=True)

    return Program(name, "graphtransformer", f"{GT}/{file}.py", file, GT, build, inputs)


def example(name, folder, file, build, inputs, stubs=None, dtype=torch.float64):
    return Program(
        name, "dgl examples", f"{EX}/{folder}/{file}.py", file, f"{EX}/{folder}", build, inputs, stubs, dtype
    )


def pna_inputs(dgl, rng, shape):
    g = homogeneous(dgl, rng, shape)
    tensors = {"h": floats(rng, shape.nodes, shape.width), "e": floats(rng, g.num_edges(), 4)}
    snorm = torch.full((shape.nodes, 1), 1.0 / np.sqrt(shape.nodes))
    return g, tensors, lambda model, g, x: model(g, x["h"], x["e"], snorm)


def compgcn_inputs(dgl, rng, shape):
    src, dst = shape.edges(rng)
    m, relations = src.numel(), 3
    g = dgl.graph((torch.cat([src, dst]), torch.cat([dst, src])), num_nodes=shape.nodes)  # each edge both ways
    g.edata["etype"] = torch.from_numpy(np.concatenate([rng.randint(0, relations, m)] * 2)).long()
    g.edata["norm"] = torch.from_numpy(rng.rand(2 * m, 1)).to(torch.get_default_dtype())
    g.edata["out_edges_mask"] = torch.cat([torch.ones(m), torch.zeros(m)]).bool()
    g.edata["in_edges_mask"] = ~g.edata["out_edges_mask"]
    tensors = {"h": floats(rng, shape.nodes, shape.width), "r": floats(rng, relations, shape.width)}
    return g, tensors, lambda model, g, x: model(g, x["h"], x["r"])


def relations_graph(dgl, rng, names=("r0", "r1", "r2")):
    """One node type ``_N`` (DGL's default), one relation per name, each with its own random edges."""
    return dgl.heterograph({("_N", name, "_N"): edges(rng, m=40) for name in names}, num_nodes_dict={"_N": N})


def film_inputs(dgl, rng, shape):
    g = relations_graph(dgl, rng)
    return g, {"h": floats(rng, N, shape.width)}, lambda model, g, x: model(g, {"_N": x["h"]})["_N"]


def care_inputs(dgl, rng, shape):
    g = relations_graph(dgl, rng)
    return g, {"h": floats(rng, N, shape.width)}, lambda model, g, x: model(g, x["h"])


USERS, ITEMS = 12, 16


def user_item_edges(rng):
    return torch.from_numpy(rng.randint(0, USERS, 60)).long(), torch.from_numpy(rng.randint(0, ITEMS, 60)).long()


def ngcf_build(m, g, d):
    """NGCF's model builds ``norm_dict`` from its graph (1/sqrt of the end points' degrees), so does this."""
    norm = {}
    for srctype, etype, dsttype in g.canonical_etypes:
        src, dst = g.edges(etype=(srctype, etype, dsttype))
        out_deg = g.out_degrees(etype=(srctype, etype, dsttype)).double()
        in_deg = g.in_degrees(etype=(srctype, etype, dsttype)).double()
        norm[(srctype, etype, dsttype)] = (out_deg[src] * in_deg[dst]).clamp(min=1).pow(-0.5).unsqueeze(1)
    return m.NGCFLayer(d, d, norm, 0.0)


def ngcf_inputs(dgl, rng, shape):
    src, dst = user_item_edges(rng)
    g = dgl.heterograph(
        {
            ("user", "ui", "item"): (src, dst),
            ("item", "iu", "user"): (dst, src),
            ("user", "self", "user"): (torch.arange(USERS), torch.arange(USERS)),
            ("item", "self", "item"): (torch.arange(ITEMS), torch.arange(ITEMS)),
        },
        num_nodes_dict={"user": USERS, "item": ITEMS},
    )
    tensors = {"user": floats(rng, USERS, shape.width), "item": floats(rng, ITEMS, shape.width)}
    return g, tensors, lambda model, g, x: tuple(model(g, {"user": x["user"], "item": x["item"]}).values())


def gas_inputs(dgl, rng, shape):
    src, dst = user_item_edges(rng)
    g = dgl.heterograph(
        {("u", "forward", "v"): (src, dst), ("v", "backward", "u"): (dst, src)}, num_nodes_dict={"u": USERS, "v": ITEMS}
    )
    d = shape.width
    tensors = {"e": floats(rng, 60, d), "u": floats(rng, USERS, d), "v": floats(rng, ITEMS, d)}
    return g, tensors, lambda model, g, x: model(g, x["e"], x["u"], x["v"])


def proteins_gat_inputs(dgl, rng, shape):
    g = homogeneous(dgl, rng, shape)
    tensors = {"h": floats(rng, shape.nodes, shape.width), "e": floats(rng, g.num_edges(), 4)}
    return g, tensors, lambda model, g, x: model(g, x["h"], x["e"])


def deepergcn_inputs(dgl, rng, shape):
    g = homogeneous(dgl, rng, shape)
    bonds = torch.from_numpy(np.stack([rng.randint(0, k, g.num_edges()) for k in (5, 6, 2)], 1)).long()
    return g, {"h": floats(rng, shape.nodes, shape.width)}, lambda model, g, x: model(g, x["h"], bonds)


class _SudokuUpdate(torch.nn.Module):
    """RRN's node update as its sudoku model wires it: an LSTM cell over ``[x, m]``."""

    def __init__(self, d):
        super().__init__()
        self.cell = torch.nn.LSTMCell(2 * d, d)

    def forward(self, nodes):
        h, c = self.cell(torch.cat([nodes.data["x"], nodes.data["m"]], -1), (nodes.data["rnn_h"], nodes.data["rnn_c"]))
        return {"h": h, "rnn_h": h, "rnn_c": c}


def rrn_build(m, g, d):
    msg = torch.nn.Sequential(torch.nn.Linear(2 * d, d), torch.nn.ReLU(), torch.nn.Linear(d, d))
    return m.RRN(msg, _SudokuUpdate(d), num_steps=2, edge_drop=0.0)


def rrn_inputs(dgl, rng, shape):
    g = homogeneous(dgl, rng, shape)
    tensors = {"x": floats(rng, shape.nodes, shape.width)}

    def run(model, g, x):
        g.ndata["x"] = x["x"]
        g.ndata["h"] = x["x"]
        g.ndata["rnn_h"] = torch.zeros(shape.nodes, shape.width)
        g.ndata["rnn_c"] = torch.zeros(shape.nodes, shape.width)
        return model(g)

    return g, tensors, run


class _Batch:
    """The fields of ``dgl.data.SSTBatch`` TreeLSTM reads."""

    def __init__(self, wordid, mask):
        self.wordid, self.mask = wordid, mask


def binary_forest(rng, trees=3, leaves=4):
    """Full binary trees, edges child -> parent, every internal node with exactly two children."""
    src, dst, base = [], [], 0
    for _ in range(trees):
        count = 2 * leaves - 1  # node 0 is the root; children of i are 2i+1, 2i+2
        for child in range(1, count):
            src.append(base + child)
            dst.append(base + (child - 1) // 2)
        base += count
    return torch.tensor(src), torch.tensor(dst), base


def tree_lstm_inputs(dgl, rng, shape):
    src, dst, n = binary_forest(rng)
    g = dgl.graph((src, dst), num_nodes=n)
    internal = torch.zeros(n, dtype=torch.bool)
    internal[dst] = True
    batch = _Batch(torch.from_numpy(rng.randint(0, 20, n)).long(), (~internal).long())
    tensors = {"h": floats(rng, n, shape.width), "c": floats(rng, n, shape.width)}
    return g, tensors, lambda model, g, x: model(batch, g, x["h"], x["c"])


def capsule_inputs(dgl, rng, shape):
    return None, {"x": floats(rng, 2, 8, 12)}, lambda model, g, x: model(x["x"])


def compgcn(comp):
    return example(
        f"compgcn-{comp}",
        "compGCN",
        "models",
        lambda m, g, d: m.CompGraphConv(d, d, comp, True, 0.0),
        compgcn_inputs,
        stubs="compgcn",
    )


def tree_lstm(cell):
    return lambda m, g, d: m.TreeLSTM(20, d, d, 3, 0.0, cell_type=cell)


PROGRAMS = [
    bgnn(
        "gatedgcn",
        "gated_gcn_layer",
        lambda m, g, d: m.GatedGCNLayer(d, d, 0.0, True, residual=True),
        node_edge_input(),
    ),
    bgnn(
        "gatedgcn-edge-only",
        "gated_gcn_layer",
        lambda m, g, d: m.GatedGCNLayerEdgeFeatOnly(d, d, 0.0, True, residual=True),
        node_edge_input(),
    ),
    bgnn(
        "gatedgcn-isotropic",
        "gated_gcn_layer",
        lambda m, g, d: m.GatedGCNLayerIsotropic(d, d, 0.0, True, residual=True),
        node_edge_input(),
    ),
    bgnn(
        "gat-builtin",
        "gat_layer",
        lambda m, g, d: m.GATLayer(d, d // 2, 2, 0.0, True, residual=True),
        node_input(self_loops=True),
    ),
    bgnn("gat-custom", "gat_layer", lambda m, g, d: m.CustomGATLayer(d, d // 2, 2, 0.0, True), node_edge_input()),
    bgnn(
        "gat-edge-repr",
        "gat_layer",
        lambda m, g, d: m.CustomGATLayerEdgeReprFeat(d, d // 2, 2, 0.0, True),
        node_edge_input(),
    ),
    bgnn(
        "gat-isotropic",
        "gat_layer",
        lambda m, g, d: m.CustomGATLayerIsotropic(d, d // 2, 2, 0.0, True),
        node_edge_input(),
    ),
    bgnn("gcn", "gcn_layer", lambda m, g, d: m.GCNLayer(d, d, F.relu, 0.0, True, residual=True), node_input()),
    bgnn(
        "gin",
        "gin_layer",
        lambda m, g, d: m.GINLayer(m.ApplyNodeFunc(m.MLP(2, d, d, d)), "sum", 0.0, True, residual=True, learn_eps=True),
        node_input(),
    ),
    bgnn(  # without batch norm and residual: the function dgl.nn's and PyG's GINConv compute
        "gin-plain",
        "gin_layer",
        lambda m, g, d: m.GINLayer(m.ApplyNodeFunc(m.MLP(2, d, d, d)), "sum", 0.0, False, learn_eps=True),
        node_input(),
    ),
    bgnn(
        "monet",
        "gmm_layer",
        lambda m, g, d: m.GMMLayer(d, d, 2, 3, "sum", 0.0, True, residual=True),
        node_edge_input(2, run=lambda model, g, x: model(g, x["h"], torch.sigmoid(x["e"]))),
    ),
    bgnn(
        "sage-maxpool",
        "graphsage_layer",
        lambda m, g, d: m.GraphSageLayer(d, d, F.relu, 0.0, "maxpool", True, residual=True),
        node_input(),
    ),
    bgnn(
        "sage-mean",
        "graphsage_layer",
        lambda m, g, d: m.GraphSageLayer(d, d, F.relu, 0.0, "mean", True, residual=True),
        node_input(),
    ),
    bgnn(
        "sage-edge-repr",
        "graphsage_layer",
        lambda m, g, d: m.GraphSageLayerEdgeReprFeat(d, d, F.relu, 0.0, "maxpool", True, residual=True),
        node_edge_input(),
    ),
    graphtransformer("graph-transformer", "graph_transformer_layer", node_input()),
    graphtransformer("graph-transformer-edge", "graph_transformer_edge_layer", node_edge_input()),
    Program(
        "pna",
        "pna",
        "pna/models/dgl/pna_layer.py",
        "models.dgl.pna_layer",
        "pna",
        lambda m, g, d: m.PNALayer(
            d,
            d,
            "mean max min std",
            "identity amplification attenuation",
            {"log": 1.5},
            0.0,
            True,
            True,
            towers=2,
            residual=True,
            edge_features=True,
            edge_dim=4,
        ),
        pna_inputs,
        stubs="pna",
    ),
    Program(
        "pna-simple",
        "pna",
        "pna/models/dgl/pna_layer.py",
        "models.dgl.pna_layer",
        "pna",
        lambda m, g, d: m.PNASimpleLayer(
            d, d, "mean max min std", "identity amplification attenuation", {"log": 1.5}, 0.0, True, True
        ),
        node_input(),
        stubs="pna",
    ),
    Program(
        "attentivefp",
        "dgl-lifesci",
        "dgl-lifesci/python/dgllife/model/gnn/attentivefp.py",
        "attentivefp",
        "dgl-lifesci/python/dgllife/model/gnn",
        lambda m, g, d: m.AttentiveFPGNN(d, 4, 2, d, 0.0),
        node_edge_input(4),
    ),
    example("arma", "arma", "model", lambda m, g, d: m.ARMAConv(d, d, 2, 2, activation=F.relu), node_input()),
    example(
        "grand",
        "grand",
        "model",
        lambda m, g, d: m.GRAND(d, d, 3, S=1, K=3),
        node_input(run=lambda model, g, x: model(g, x["h"], training=False)),
        dtype=torch.float32,
    ),
    *[compgcn(comp) for comp in ("sub", "mul", "ccorr")],
    example(
        "proteins-gat",
        "ogb/ogbn-proteins",
        "models",
        lambda m, g, d: m.GATConv(d, 4, d // 2, n_heads=2),
        proteins_gat_inputs,
    ),
    example(
        "deepergcn-genconv",
        "deepergcn",
        "layers",
        lambda m, g, d: m.GENConv(d, d, "softmax", learn_beta=True, msg_norm=True, learn_msg_scale=True),
        deepergcn_inputs,
        stubs="deepergcn",
    ),
    example(
        "gnn-film",
        "GNN-FiLM",
        "main",
        lambda m, g, d: m.GNNFiLMLayer(d, d, ["r0", "r1", "r2"], 0.0),
        film_inputs,
        stubs="film",
    ),
    example("ngcf", "NGCF/NGCF", "model", ngcf_build, ngcf_inputs),
    example(
        "care-gnn",
        "caregnn",
        "model",
        lambda m, g, d: m.CAREConv(d, d, 2, [("_N", r, "_N") for r in ("r0", "r1", "r2")], activation=F.relu),
        care_inputs,
    ),
    example("gas", "gas", "model", lambda m, g, d: m.GASConv(d, d, d, d, d, d, activation=F.relu), gas_inputs),
    example("dagnn", "dagnn", "main", lambda m, g, d: m.DAGNNConv(d, 3), node_input(), stubs="dagnn"),
    example("rrn", "rrn", "rrn", rrn_build, rrn_inputs),
    example("tree-lstm", "tree_lstm", "tree_lstm", tree_lstm("nary"), tree_lstm_inputs),
    example("tree-lstm-childsum", "tree_lstm", "tree_lstm", tree_lstm("childsum"), tree_lstm_inputs),
    example(
        "capsule-routing",
        "capsule",
        "DGLDigitCapsule",
        lambda m, g, d: m.DGLDigitCapsuleLayer(in_nodes_dim=8, in_nodes=12, out_nodes=4, out_nodes_dim=4),
        capsule_inputs,
    ),
]
BY_NAME = {p.name: p for p in PROGRAMS}


def load_shape(path) -> Shape:
    """The ``Shape`` a ``.npz`` with ``src``, ``dst``, ``nodes`` and ``width`` holds (``bench/zoo.py`` writes it)."""
    arrays = np.load(path)
    return Shape(int(arrays["nodes"]), int(arrays["width"]), arrays["src"], arrays["dst"])
