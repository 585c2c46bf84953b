"""DGL's graph transformer modules (``dgl.nn.pytorch.gt``) with DGL 2.1's constructors, parameter names and
numbers: dense attention over padded batches of nodes and the encoders that feed it."""
from .biased_mha import BiasedMHA
from .degree_encoder import DegreeEncoder
from .lap_pos_encoder import LapPosEncoder

__all__ = ["BiasedMHA", "DegreeEncoder", "LapPosEncoder"]
