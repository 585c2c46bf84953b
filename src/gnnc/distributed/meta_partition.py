"""Meta-partitioning of a heterogeneous graph (Heta, Algorithm 2).

1. Metatree: the HGNN's computation dependency unfolded from the target
   type. A vertex of type t at depth < k gets one child per relation
   (s, r, t) whose messages arrive at t, in graph order; the child has type
   s. ``build_metatree`` does this k-depth BFS; ``metatree_from_metapaths``
   merges user metapaths instead. Cycles of the metagraph repeat relations.
2. Split: one sub-metatree per child of the root (the root, the child and
   its descendants); its weight is the sum of the weights of its distinct
   node types (root included) and distinct relations. With ogbn-mag's
   published counts (cites in both directions, as in Heta) this gives
   Figure 6's 16, 17 and 27 million.
3. Assign: longest-processing-time first onto p parts (heaviest
   sub-metatree to the least loaded part, ties to the lowest index). When
   there are more parts than sub-metatrees, sub-metatrees are replicated
   (Heta §5, Discussions): the one with the largest weight per replica gets
   another replica until every part has one; replicas of a sub-metatree
   split its target nodes (target id mod replicas) and train the same
   relations data-parallel.
4. Deduplicate: a part keeps each of its relations and node types once,
   with the complete mono-relation subgraph of every relation, all nodes of
   its node types and their features. Every part holds all target nodes.

Below the root every metatree vertex belongs to exactly one sub-metatree,
so aggregations combine messages from several parts only at the root: the
boundary nodes of a part are target nodes (Figure 6). Precisely, a part's
boundary nodes are the targets in its share that receive edges of the
part's root relations and also of another sub-metatree group's root
relations. Non-target node types may still be stored by several parts (the
author type sits in both parts of Figure 6): their rows are inputs there,
never combined across parts, but learnable embeddings of such a type get
gradients in every part that stores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph import Graph
from .metagraph import Relation, WeightedMetagraph, node_features, typed_subgraph
from .partition_io import PartitionedGraph, Partitioning, max_over_mean


@dataclass(frozen=True)
class MetaTree:
    """A metatree vertex: its node type, the relation to its parent (messages
    flow from this vertex to the parent; None at the root) and its children."""

    ntype: str
    relation: Relation | None = None
    children: tuple[MetaTree, ...] = ()

    def links(self) -> list[Relation]:
        """Relations of every vertex below this one, preorder, repeats kept."""
        out = []
        for child in self.children:
            out.append(child.relation)
            out.extend(child.links())
        return out

    def node_types(self) -> list[str]:
        """Node types of this vertex and every descendant, preorder, repeats kept."""
        return [self.ntype] + [t for child in self.children for t in child.node_types()]

    def to_json(self) -> dict:
        return {
            "ntype": self.ntype,
            "relation": None if self.relation is None else list(self.relation),
            "children": [c.to_json() for c in self.children],
        }

    @classmethod
    def from_json(cls, obj: dict) -> MetaTree:
        rel = None if obj["relation"] is None else tuple(obj["relation"])
        return cls(obj["ntype"], rel, tuple(cls.from_json(c) for c in obj["children"]))

    def lines(self, depth: int = 0) -> list[str]:
        """Indented text, one vertex per line: ``type <-[relation]- child type``."""
        head = self.ntype if self.relation is None else f"<-[{self.relation[1]}]- {self.ntype}"
        return ["  " * depth + head] + [line for c in self.children for line in c.lines(depth + 1)]


@dataclass(frozen=True)
class SubMetatree:
    """The root plus one of its children and that child's descendants."""

    root: str
    child: MetaTree
    weight: int

    @property
    def relations(self) -> list[Relation]:
        """Distinct relations, first occurrence order; the first is the root relation."""
        return list(dict.fromkeys([self.child.relation] + self.child.links()))

    @property
    def node_types(self) -> list[str]:
        return list(dict.fromkeys([self.root] + self.child.node_types()))


@dataclass(frozen=True)
class MetaAssignment:
    """One part's share: sub-metatree indices, its replica index among
    ``replicas`` parts with the same share, and its load (weight / replicas)."""

    subtrees: tuple[int, ...]
    replica: int
    replicas: int
    load: float


@dataclass(frozen=True)
class MetaPlan:
    """The metatree, its sub-metatrees (sorted by descending weight) and each part's share."""

    target: str
    tree: MetaTree
    subtrees: tuple[SubMetatree, ...]
    assignments: tuple[MetaAssignment, ...]

    def relations(self, part: int, order: list[Relation]) -> list[Relation]:
        """Deduplicated relations of ``part`` in ``order`` (the graph's)."""
        used = {rel for i in self.assignments[part].subtrees for rel in self.subtrees[i].relations}
        return [rel for rel in order if rel in used]

    def node_types(self, part: int, order: list[str]) -> list[str]:
        used = {t for i in self.assignments[part].subtrees for t in self.subtrees[i].node_types}
        return [t for t in order if t in used]

    def root_relations(self, part: int) -> list[Relation]:
        """Relations whose messages this part aggregates at the target vertex."""
        return [self.subtrees[i].child.relation for i in self.assignments[part].subtrees]

    def load_balance(self) -> float:
        return max_over_mean([a.load for a in self.assignments])


def build_metatree(mg: WeightedMetagraph, target: str, depth: int) -> MetaTree:
    """k-depth BFS from ``target`` over relations pointing toward each vertex."""
    _check_target(mg, target)
    if int(depth) != depth or depth < 1:
        raise ValueError(f"metatree depth must be a positive integer, got {depth!r}")

    def grow(ntype: str, relation, remaining: int) -> MetaTree:
        if remaining == 0:
            return MetaTree(ntype, relation)
        return MetaTree(ntype, relation, tuple(grow(rel[0], rel, remaining - 1) for rel in mg.in_relations(ntype)))

    return grow(target, None, int(depth))


def metatree_from_metapaths(mg: WeightedMetagraph, target: str, metapaths) -> MetaTree:
    """Metatree whose root-to-leaf paths are the given metapaths (shared prefixes merged).

    A metapath lists relations hop by hop from the target outward: the first
    relation ends at ``target`` and each next one ends at the node type the
    previous one starts from. Relations may be names or (src, name, dst).
    """
    _check_target(mg, target)
    trie: dict = {}
    for k, path in enumerate(metapaths):
        rels = [mg.resolve(r) for r in path]
        if not rels:
            raise ValueError(f"metapath {k} is empty")
        at = target
        node = trie
        for rel in rels:
            if rel[2] != at:
                raise ValueError(f"metapath {k} {list(path)}: relation {rel} does not end at {at!r}")
            node = node.setdefault(rel, {})
            at = rel[0]

    def build(ntype, relation, children: dict) -> MetaTree:
        return MetaTree(ntype, relation, tuple(build(rel[0], rel, sub) for rel, sub in children.items()))

    return build(target, None, trie)


def split_metatree(tree: MetaTree, mg: WeightedMetagraph) -> list[SubMetatree]:
    """One weighted sub-metatree per child of the root, in child order."""
    out = []
    for child in tree.children:
        rels = list(dict.fromkeys([child.relation] + child.links()))
        ntypes = list(dict.fromkeys([tree.ntype] + child.node_types()))
        out.append(SubMetatree(tree.ntype, child, mg.weight(ntypes, rels)))
    return out


def lpt_assign(weights, parts: int) -> tuple[list[list[int]], list[int]]:
    """Longest-processing-time first: item indices per part and each part's load.

    Items go in descending weight (stable), each to the least loaded part;
    ties go to the part with fewer items, then the lowest index (so no part
    stays empty while there are items, even of weight 0).
    """
    groups, loads = [[] for _ in range(parts)], [0] * parts
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        p = min(range(parts), key=lambda j: (loads[j], len(groups[j]), j))
        groups[p].append(i)
        loads[p] += weights[i]
    return groups, loads


def replica_counts(weights, parts: int) -> list[int]:
    """Replicas per item so that their total is ``parts`` (>= number of items):
    repeatedly give one more to the item with the largest weight per replica."""
    counts = [1] * len(weights)
    for _ in range(parts - len(weights)):
        i = max(range(len(weights)), key=lambda i: (weights[i] / counts[i], -i))
        counts[i] += 1
    return counts


def plan_meta_partitions(mg: WeightedMetagraph, target: str, parts: int, depth: int = 2, metapaths=None) -> MetaPlan:
    """Steps 1-3 of Algorithm 2 on the metagraph alone."""
    if int(parts) != parts or parts < 1:
        raise ValueError(f"number of parts must be a positive integer, got {parts!r}")
    tree = metatree_from_metapaths(mg, target, metapaths) if metapaths else build_metatree(mg, target, depth)
    subtrees = split_metatree(tree, mg)
    if not subtrees:
        raise ValueError(
            f"no relation ends at target type {target!r}, so the metatree has no sub-metatrees; "
            f"relations: {mg.relations} (add_reverse_relations may help)"
        )
    order = sorted(range(len(subtrees)), key=lambda i: -subtrees[i].weight)
    subtrees = [subtrees[i] for i in order]
    weights = [s.weight for s in subtrees]
    if parts <= len(subtrees):
        groups, loads = lpt_assign(weights, parts)
        assignments = [MetaAssignment(tuple(g), 0, 1, float(load)) for g, load in zip(groups, loads)]
    else:
        assignments = [
            MetaAssignment((i,), j, r, w / r)
            for i, (w, r) in enumerate(zip(weights, replica_counts(weights, parts)))
            for j in range(r)
        ]
    return MetaPlan(target, tree, tuple(subtrees), tuple(assignments))


def meta_partition(g: Graph, target: str, parts: int, depth: int = 2, metapaths=None) -> PartitionedGraph:
    """Heta meta-partitioning of ``g`` into ``parts`` parts (see the module docstring)."""
    mg = WeightedMetagraph.of(g)
    plan = plan_meta_partitions(mg, target, parts, depth, metapaths)
    boundary = _boundary_targets(g, plan)
    out = []
    for p, share in enumerate(plan.assignments):
        rels = plan.relations(p, g.canonical_etypes)
        ntypes = plan.node_types(p, g.ntypes)
        sub = typed_subgraph(g, ntypes, rels)
        info = {
            "target": target,
            "replica": [share.replica, share.replicas],
            "load": share.load,
            "root_relations": [list(rel) for rel in plan.root_relations(p)],
            "subtrees": [plan.subtrees[i].child.to_json() for i in share.subtrees],
        }
        out.append(
            Partitioning(
                part_id=p,
                graph=sub,
                node_ids={t: torch.arange(g.num_nodes(t)) for t in ntypes},
                num_owned={t: g.num_nodes(t) for t in ntypes},
                edge_ids={rel: torch.arange(g.num_edges(rel)) for rel in rels},
                node_feats={t: node_features(g, t) for t in ntypes},
                boundary={target: boundary[p]} if boundary[p].numel() else {},
                info=info,
            )
        )
    params = {
        "target": target,
        "depth": None if metapaths else int(depth),
        "metapaths": [[list(mg.resolve(r)) for r in path] for path in metapaths] if metapaths else None,
        "tree": plan.tree.to_json(),
        "subtree_weights": [s.weight for s in plan.subtrees],
        "load_balance": plan.load_balance(),
    }
    return PartitionedGraph("meta", g.metagraph(), out, params)


def target_share(part: Partitioning) -> torch.Tensor:
    """Target node ids whose root aggregations ``part`` computes (all, unless replicated)."""
    replica, replicas = part.info["replica"]
    ids = torch.arange(part.graph.num_nodes(part.info["target"]))
    return ids[ids % replicas == replica]


def _boundary_targets(g: Graph, plan: MetaPlan) -> list[torch.Tensor]:
    """Per part: targets in its share that receive edges of its root relations and of another group's."""
    n = g.num_nodes(plan.target)
    groups = sorted({a.subtrees for a in plan.assignments})
    receives = {}
    for key in groups:
        hit = torch.zeros(n, dtype=torch.bool)
        for i in key:
            hit[g.find_edges(plan.subtrees[i].child.relation)[1]] = True
        receives[key] = hit
    contributors = torch.stack([receives[k] for k in groups]).sum(0)
    ids = torch.arange(n)
    out = []
    for share in plan.assignments:
        mine = (ids % share.replicas == share.replica) & receives[share.subtrees] & (contributors >= 2)
        out.append(ids[mine])
    return out


def _check_target(mg: WeightedMetagraph, target: str) -> None:
    if target not in mg.node_counts:
        raise KeyError(f"unknown target node type {target!r}; node types: {mg.ntypes}")
