"""DGL's link prediction and knowledge-graph score modules (``dgl.nn.pytorch.link``) with DGL 2.1's
constructors, parameter names and numbers."""

from .edgepred import EdgePredictor
from .transe import TransE
from .transr import TransR

__all__ = ["EdgePredictor", "TransE", "TransR"]
