"""gnnc's ``nn`` namespace, what DGL's ``dgl.nn.pytorch`` is under gnnc's DGL alias: DGL's layer names with
DGL 2.1's constructors, parameter names and numbers (``conv``, ``HeteroGraphConv``, ``TypedLinear``), its
readout modules (``glob``) and ``edge_softmax`` (``functional``); and gnnc's own trainable blocks outside
message passing: per-type input embeddings (``TypedEmbedding``) and the lazy, per-row ``SparseAdam`` that
updates them."""
from .conv import (
    AGNNConv,
    APPNPConv,
    AtomicConv,
    CFConv,
    ChebConv,
    DenseChebConv,
    DenseGraphConv,
    DenseSAGEConv,
    DGNConv,
    DotGatConv,
    EdgeConv,
    EdgeGATConv,
    EdgeWeightNorm,
    EGATConv,
    EGNNConv,
    GATConv,
    GatedGraphConv,
    GATv2Conv,
    GCN2Conv,
    GINConv,
    GINEConv,
    GMMConv,
    GraphConv,
    GroupRevRes,
    HGTConv,
    NNConv,
    PNAConv,
    RelGraphConv,
    SAGEConv,
    SGConv,
    TAGConv,
    TWIRLSConv,
)
from .embedding import TypedEmbedding
from .factory import RadiusGraph
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
from .hetero_modules import HeteroEmbedding, HeteroLinear
from .linear import TypedLinear
from .link import EdgePredictor, TransE, TransR
from .set_transformer import SetTransformerDecoder, SetTransformerEncoder
from .sparse_adam import SparseAdam
from .utils import Identity, JumpingKnowledge, LabelPropagation, Sequential

__all__ = ["AGNNConv", "APPNPConv", "AtomicConv", "AvgPooling", "BiasedMHA", "CFConv", "ChebConv", "DGNConv",
           "DegreeEncoder", "DenseChebConv", "DenseGraphConv", "DenseSAGEConv", "DotGatConv", "EGATConv", "EGNNConv",
           "EGTLayer", "EdgeConv", "EdgeGATConv", "EdgePredictor", "EdgeWeightNorm", "GATConv", "GATv2Conv",
           "GCN2Conv", "GINConv", "GINEConv", "GMMConv", "GatedGraphConv", "GlobalAttentionPooling", "GraphConv",
           "GraphormerLayer", "GroupRevRes", "HGTConv", "HeteroEmbedding", "HeteroGraphConv", "HeteroLinear",
           "Identity", "JumpingKnowledge", "LabelPropagation", "LapPosEncoder", "MaxPooling", "NNConv", "PNAConv",
           "PathEncoder", "RadiusGraph", "RelGraphConv", "SAGEConv", "SGConv", "Sequential", "Set2Set",
           "SetTransformerDecoder", "SetTransformerEncoder", "SortPooling", "SparseAdam", "SpatialEncoder",
           "SpatialEncoder3d", "SumPooling", "TAGConv", "TWIRLSConv", "TransE", "TransR", "TypedEmbedding",
           "TypedLinear", "edge_softmax"]
