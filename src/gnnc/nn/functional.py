"""DGL's ``dgl.nn.functional``: ``edge_softmax`` (gnnc's ``gnnc.ops.edge_softmax``)."""

from ..ops import edge_softmax

__all__ = ["edge_softmax"]
