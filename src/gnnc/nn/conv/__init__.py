"""DGL's graph convolution layers (``dgl.nn.pytorch.conv``) with DGL 2.1's constructors, parameter names and
numbers, written as gnnc message passing (so ``gnnc.compile`` compiles them). One layer per module."""

from .agnnconv import AGNNConv
from .appnpconv import APPNPConv
from .atomicconv import AtomicConv
from .cfconv import CFConv
from .chebconv import ChebConv
from .densechebconv import DenseChebConv
from .densegraphconv import DenseGraphConv
from .densesageconv import DenseSAGEConv
from .dgnconv import DGNConv
from .dotgatconv import DotGatConv
from .edgeconv import EdgeConv
from .edgegatconv import EdgeGATConv
from .edgeweightnorm import EdgeWeightNorm
from .egatconv import EGATConv
from .egnnconv import EGNNConv
from .gatconv import GATConv
from .gatedgraphconv import GatedGraphConv
from .gatv2conv import GATv2Conv
from .gcn2conv import GCN2Conv
from .ginconv import GINConv
from .gineconv import GINEConv
from .gmmconv import GMMConv
from .graphconv import GraphConv
from .grouprevres import GroupRevRes
from .hgtconv import HGTConv
from .nnconv import NNConv
from .pnaconv import PNAConv
from .relgraphconv import RelGraphConv
from .sageconv import SAGEConv
from .sgconv import SGConv
from .tagconv import TAGConv
from .twirlsconv import TWIRLSConv

__all__ = [
    "AGNNConv",
    "APPNPConv",
    "AtomicConv",
    "CFConv",
    "ChebConv",
    "DGNConv",
    "DenseChebConv",
    "DenseGraphConv",
    "DenseSAGEConv",
    "DotGatConv",
    "EGATConv",
    "EGNNConv",
    "EdgeConv",
    "EdgeGATConv",
    "EdgeWeightNorm",
    "GATConv",
    "GATv2Conv",
    "GCN2Conv",
    "GINConv",
    "GINEConv",
    "GMMConv",
    "GatedGraphConv",
    "GraphConv",
    "GroupRevRes",
    "HGTConv",
    "NNConv",
    "PNAConv",
    "RelGraphConv",
    "SAGEConv",
    "SGConv",
    "TAGConv",
    "TWIRLSConv",
]
