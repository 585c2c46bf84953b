"""gnnc's ``nn`` namespace, what DGL's ``dgl.nn.pytorch`` is under gnnc's DGL alias: DGL's layer names with
DGL 2.1's constructors, parameter names and numbers (``conv``, ``HeteroGraphConv``, ``TypedLinear``), its
readout modules (``glob``) and ``edge_softmax`` (``functional``); and gnnc's own trainable blocks outside
message passing: per-type input embeddings (``TypedEmbedding``) and the lazy, per-row ``SparseAdam`` that
updates them."""
from .conv import (
    APPNPConv,
    AtomicConv,
    ChebConv,
    DenseChebConv,
    DenseGraphConv,
    DenseSAGEConv,
    EdgeConv,
    EdgeWeightNorm,
    EGNNConv,
    GATConv,
    GATv2Conv,
    GINConv,
    GraphConv,
    RelGraphConv,
    SAGEConv,
    SGConv,
    TAGConv,
)
from .embedding import TypedEmbedding
from .functional import edge_softmax
from .glob import (
    AvgPooling,
    GlobalAttentionPooling,
    MaxPooling,
    Set2Set,
    SortPooling,
    SumPooling,
)
from .gt import (
    BiasedMHA,
    DegreeEncoder,
    EGTLayer,
    GraphormerLayer,
    LapPosEncoder,
    PathEncoder,
    SpatialEncoder,
    SpatialEncoder3d,
)
from .hetero import HeteroGraphConv
from .linear import TypedLinear
from .sparse_adam import SparseAdam
from .utils import Identity, JumpingKnowledge, LabelPropagation, Sequential

__all__ = ["APPNPConv", "AtomicConv", "AvgPooling", "BiasedMHA", "ChebConv", "DegreeEncoder", "DenseChebConv",
           "DenseGraphConv", "DenseSAGEConv", "EGNNConv", "EGTLayer", "EdgeConv", "EdgeWeightNorm", "GATConv",
           "GATv2Conv", "GINConv", "GlobalAttentionPooling", "GraphConv", "GraphormerLayer", "HeteroGraphConv",
           "Identity", "JumpingKnowledge", "LabelPropagation", "LapPosEncoder", "MaxPooling", "PathEncoder",
           "RelGraphConv", "SAGEConv", "SGConv", "Sequential", "Set2Set", "SortPooling", "SparseAdam",
           "SpatialEncoder", "SpatialEncoder3d", "SumPooling", "TAGConv", "TypedEmbedding", "TypedLinear",
           "edge_softmax"]
