"""``dgl.utils`` under gnnc's DGL alias: the helpers DGL's layer code imports from it."""
from ..nn.conv.common import expand_as_pair

__all__ = ["expand_as_pair"]
