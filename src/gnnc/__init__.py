"""gnnc: compile message-passing GNN UDFs into fast, memory-lean execution plans."""
from . import data, function, graph, models
from .graph import Graph, MetaGraph, heterograph
from .frontend import EdgeBatch, NodeBatch

__version__ = "0.1.0"
__all__ = ["graph", "heterograph", "Graph", "MetaGraph", "EdgeBatch", "NodeBatch", "function", "data", "models"]
