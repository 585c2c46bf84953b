"""DGL's graph transformer modules (``dgl.nn.pytorch.gt``) with DGL 2.1's constructors, parameter names and
numbers: dense attention over padded batches of nodes and the encoders that feed it."""

from .biased_mha import BiasedMHA
from .degree_encoder import DegreeEncoder
from .egt import EGTLayer
from .graphormer import GraphormerLayer
from .lap_pos_encoder import LapPosEncoder
from .path_encoder import PathEncoder
from .spatial_encoder import SpatialEncoder, SpatialEncoder3d

__all__ = [
    "BiasedMHA",
    "DegreeEncoder",
    "EGTLayer",
    "GraphormerLayer",
    "LapPosEncoder",
    "PathEncoder",
    "SpatialEncoder",
    "SpatialEncoder3d",
]
