"""Reference models written as UDFs, with no optimization knobs.

Messages are UDFs. An aggregation that is a plain sum, mean or max is a built-in reducer: DGL never calls a
reduce UDF on a graph without edges, where built-ins give zeros. A softmax aggregation is a reduce UDF over a
zeros default the layer writes first. Each layer's docstring gives its equations; tests check every one against an
independent index_select / index_add implementation, forward and backward.
"""

from .appnp import APPNPConv
from .edgeconv import EdgeConv
from .gat import GAT, GATConv
from .gatv2 import GATv2Conv
from .gcn import GCN, GCNConv
from .gcnn import GCNNConv
from .gin import GINConv
from .hgt import HGTConv
from .monet import GMMConv
from .rgat import RGATConv
from .rgcn import RGCNConv
from .sage import SAGEConv
from .simple_hgn import SimpleHGNConv

__all__ = [
    "GCNConv",
    "GCN",
    "GATConv",
    "GAT",
    "GCNNConv",
    "EdgeConv",
    "GMMConv",
    "RGCNConv",
    "RGATConv",
    "HGTConv",
    "SimpleHGNConv",
    "SAGEConv",
    "GINConv",
    "GATv2Conv",
    "APPNPConv",
]
