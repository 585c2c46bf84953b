"""gnnc: compile message-passing GNN UDFs into fast, memory-lean execution plans."""
from . import data, function, graph, models, ops
from .graph import Graph, MetaGraph, heterograph
from .frontend import EdgeBatch, NodeBatch
from .compile import CompiledModule, compile, explain
from .ir.rules import register_rule
from .runtime.compiled import FallbackWarning

__version__ = "0.1.0"
__all__ = ["graph", "heterograph", "Graph", "MetaGraph", "EdgeBatch", "NodeBatch", "function", "ops", "data", "models",
           "compile", "CompiledModule", "explain", "register_rule", "FallbackWarning"]
