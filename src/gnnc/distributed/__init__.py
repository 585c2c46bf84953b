"""Distributed training: Heta's meta-partitioning and edge-cut baselines, RAF and vanilla trainers, launch.

``meta_partition`` implements Heta's Algorithm 2 on a ``WeightedMetagraph``;
``random_partition`` / ``metis_partition`` are the edge-cut baselines; both
return a ``PartitionedGraph`` of ``Partitioning`` records that
``save_partitions`` / ``load_partitions`` write and read (format documented
in ``gnnc.distributed.partition_io``).
"""

from ..graph.reverse_relations import add_reverse_relations
from .edgecut import (
    edge_cut,
    edge_cut_partition,
    homogeneous_adjacency,
    metis_owner,
    metis_partition,
    random_owner,
    random_partition,
)
from .meta_partition import (
    MetaAssignment,
    MetaPlan,
    MetaTree,
    SubMetatree,
    build_metatree,
    lpt_assign,
    meta_partition,
    metatree_from_metapaths,
    plan_meta_partitions,
    replica_counts,
    split_metatree,
    target_share,
)
from .metagraph import WeightedMetagraph, typed_subgraph
from .partition_io import PartitionedGraph, Partitioning, load_partitions, max_over_mean, save_partitions

__all__ = [
    "WeightedMetagraph",
    "add_reverse_relations",
    "typed_subgraph",
    "MetaTree",
    "SubMetatree",
    "MetaAssignment",
    "MetaPlan",
    "build_metatree",
    "metatree_from_metapaths",
    "split_metatree",
    "lpt_assign",
    "replica_counts",
    "plan_meta_partitions",
    "meta_partition",
    "target_share",
    "random_owner",
    "metis_owner",
    "homogeneous_adjacency",
    "edge_cut",
    "edge_cut_partition",
    "random_partition",
    "metis_partition",
    "Partitioning",
    "PartitionedGraph",
    "save_partitions",
    "load_partitions",
    "max_over_mean",
]
