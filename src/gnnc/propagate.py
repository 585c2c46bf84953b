"""DGL's propagation functions: message passing frontier by frontier along a traversal.

``prop_nodes`` pulls each node frontier in turn, ``prop_edges`` sends and receives along each edge frontier
(``Graph.prop_nodes`` / ``Graph.prop_edges``); the others take their frontiers from
``gnnc.graph.traversal`` (tree-LSTMs propagate along ``prop_nodes_topo``). Each step is a partial call, run
as ``pull`` / ``send_and_recv`` run it.
"""

from __future__ import annotations

from .graph import traversal


def prop_nodes(graph, nodes_generator, message_func, reduce_func, apply_node_func=None, etype=None) -> None:
    """``graph.pull`` on each frontier of ``nodes_generator`` in turn."""
    graph.prop_nodes(nodes_generator, message_func, reduce_func, apply_node_func, etype=etype)


def prop_edges(graph, edges_generator, message_func, reduce_func, apply_node_func=None, etype=None) -> None:
    """``graph.send_and_recv`` on each frontier of ``edges_generator`` in turn."""
    graph.prop_edges(edges_generator, message_func, reduce_func, apply_node_func, etype=etype)


def prop_nodes_bfs(graph, source, message_func, reduce_func, reverse=False, apply_node_func=None) -> None:
    """Pull the breadth-first layers from ``source`` in order."""
    prop_nodes(graph, traversal.bfs_nodes_generator(graph, source, reverse), message_func, reduce_func, apply_node_func)


def prop_nodes_topo(graph, message_func, reduce_func, reverse=False, apply_node_func=None) -> None:
    """Pull the topological layers in order (leaves first in a tree whose edges point to the root)."""
    prop_nodes(graph, traversal.topological_nodes_generator(graph, reverse), message_func, reduce_func, apply_node_func)


def prop_edges_dfs(
    graph,
    source,
    message_func,
    reduce_func,
    reverse=False,
    has_reverse_edge=False,
    has_nontree_edge=False,
    apply_node_func=None,
) -> None:
    """Send and receive along the depth-first steps from ``source``
    (``traversal.dfs_labeled_edges_generator``'s edges)."""
    steps = traversal.dfs_labeled_edges_generator(
        graph, source, reverse, has_reverse_edge, has_nontree_edge, return_labels=False
    )
    prop_edges(graph, steps, message_func, reduce_func, apply_node_func)
