"""Containers returned by the loaders and generators."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph import Graph


@dataclass
class Dataset:
    """A graph whose ``target_ntype`` nodes carry ``label`` (int64) and
    boolean ``train_mask`` / ``val_mask`` / ``test_mask``; node features, when
    present, are ``graph.ndata_all['feat']`` (float32)."""

    name: str
    graph: Graph
    num_classes: int
    target_ntype: str

    @property
    def target_data(self):
        """``graph.nodes[target_ntype].data``: labels and masks live here."""
        return self.graph.nodes[self.target_ntype].data


class OneGraphDataset:
    """DGL's shape of a one-graph dataset: ``len`` 1, ``ds[0]`` the graph (through ``transform`` when given),
    ``num_classes``."""

    def __init__(self, graph: Graph, num_classes: int, transform=None):
        self._graph, self._num_classes, self._transform = graph, num_classes, transform

    @property
    def num_classes(self) -> int:
        return self._num_classes

    def __len__(self) -> int:
        return 1

    def __getitem__(self, idx):
        if idx != 0:
            raise IndexError(f"{type(self).__name__} holds one graph; index 0, not {idx}")
        return self._graph if self._transform is None else self._transform(self._graph)


@dataclass
class KGDataset:
    """A knowledge graph: one node type ``'entity'``, one relation per KG relation.

    ``triples[split]`` is an int64 tensor [n, 3] of (head, relation, tail)
    indices into ``entities`` / ``relations`` (forward relations only, even
    when the graph also holds inverse relations).
    """

    name: str
    graph: Graph
    entities: list[str]
    relations: list[str]
    triples: dict[str, torch.Tensor]

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)


def split_masks(num: int, order: torch.Tensor, fractions=(0.6, 0.2)) -> tuple[torch.Tensor, ...]:
    """Train / val / test masks over ``num`` nodes from a permutation ``order``.

    The first ``round(num * fractions[0])`` nodes of ``order`` train, the next
    ``round(num * fractions[1])`` validate, the rest test.
    """
    n_train = int(num * fractions[0] + 0.5)
    n_val = min(int(num * fractions[1] + 0.5), num - n_train)
    masks = []
    for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, num)):
        mask = torch.zeros(num, dtype=torch.bool)
        mask[order[lo:hi]] = True
        masks.append(mask)
    return tuple(masks)


def index_mask(num: int, index) -> torch.Tensor:
    """Boolean mask of length ``num`` that is True at ``index``."""
    mask = torch.zeros(num, dtype=torch.bool)
    mask[torch.as_tensor(index, dtype=torch.int64)] = True
    return mask
