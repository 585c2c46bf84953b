"""gnnc: compile message-passing GNN UDFs into fast, memory-lean execution plans."""

from . import data, function, graph, models, ops, readout
from .compile import CompiledModule, compile, explain
from .compiler.driver import FallbackWarning
from .graph import Graph, MetaGraph, heterograph
from .graph.batching import batch, slice_batch, unbatch
from .graph.homogeneous import to_heterogeneous, to_homogeneous
from .graph.merge import merge
from .graph.subgraph import (
    edge_subgraph,
    edge_type_subgraph,
    in_subgraph,
    khop_in_subgraph,
    khop_out_subgraph,
    node_subgraph,
    node_type_subgraph,
    out_subgraph,
    to_block,
)
from .graph.transforms import add_edges, add_nodes, add_self_loop, remove_edges, remove_nodes, remove_self_loop
from .graph.traversal import (
    bfs_edges_generator,
    bfs_nodes_generator,
    dfs_edges_generator,
    dfs_labeled_edges_generator,
    topological_nodes_generator,
)
from .ir.rules import register_rule
from .propagate import prop_edges, prop_edges_dfs, prop_nodes, prop_nodes_bfs, prop_nodes_topo
from .readout import (
    broadcast_edges,
    broadcast_nodes,
    max_edges,
    max_nodes,
    mean_edges,
    mean_nodes,
    readout_edges,
    readout_nodes,
    softmax_edges,
    softmax_nodes,
    sum_edges,
    sum_nodes,
    topk_edges,
    topk_nodes,
)
from .runtime.udf_views import EdgeBatch, NodeBatch

__version__ = "0.1.0"
__all__ = [
    "graph",
    "heterograph",
    "Graph",
    "MetaGraph",
    "EdgeBatch",
    "NodeBatch",
    "function",
    "ops",
    "data",
    "models",
    "compile",
    "CompiledModule",
    "explain",
    "register_rule",
    "FallbackWarning",
    "batch",
    "unbatch",
    "readout",
    "readout_nodes",
    "readout_edges",
    "sum_nodes",
    "mean_nodes",
    "max_nodes",
    "sum_edges",
    "mean_edges",
    "max_edges",
    "broadcast_nodes",
    "softmax_nodes",
    "prop_nodes",
    "prop_edges",
    "prop_nodes_bfs",
    "prop_nodes_topo",
    "prop_edges_dfs",
    "bfs_nodes_generator",
    "bfs_edges_generator",
    "topological_nodes_generator",
    "dfs_edges_generator",
    "dfs_labeled_edges_generator",
    "add_nodes",
    "add_edges",
    "remove_nodes",
    "remove_edges",
    "add_self_loop",
    "remove_self_loop",
    "to_homogeneous",
    "to_heterogeneous",
    "node_subgraph",
    "edge_subgraph",
    "in_subgraph",
    "out_subgraph",
    "khop_in_subgraph",
    "khop_out_subgraph",
    "node_type_subgraph",
    "edge_type_subgraph",
    "to_block",
    "slice_batch",
    "merge",
    "broadcast_edges",
    "softmax_edges",
    "topk_nodes",
    "topk_edges",
]
