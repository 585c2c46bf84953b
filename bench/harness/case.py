"""One (model, dataset) pair ready to run, and a system's runnable form of it (imports no gnnc)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:  # kept out at run time: the peer interpreter imports Prepared without gnnc
    from .datasets import BenchData
    from .models import ModelSpec


@dataclass
class Case:
    """The eager reference layer (built under the run's seed) on its graph, with its extra inputs, all on
    ``device``."""

    model: ModelSpec
    data: BenchData
    eager: nn.Module
    inputs: tuple
    device: str = "cpu"

    @classmethod
    def build(cls, model: ModelSpec, data: BenchData, seed: int, device: str = "cpu") -> Case:
        """The layer is built on the CPU under ``seed`` (the same parameters on every device), then graph,
        features and layer are moved to ``device`` and the extra inputs computed there."""
        torch.manual_seed(seed)
        layer = model.build(data).to(device)
        if device != "cpu":
            data = replace(data, graph=data.graph.to(device), x=data.x.to(device))
        return cls(model, data, layer, model.inputs(data), device)


@dataclass
class Prepared:
    """A system's form of a case.

    ``call(x)`` runs the layer on input features ``x`` and returns the
    system's native output; ``view(out)`` turns that output into the 2-D
    tensor the gate compares with the eager layer's; ``module`` holds the
    parameters a training step updates.
    """

    module: nn.Module
    call: Callable[[torch.Tensor], Any]
    view: Callable[[Any], torch.Tensor]


def prepared_like_eager(module: nn.Module, case: Case) -> Prepared:
    """``module`` called and read exactly as the eager layer is (for eager itself and for gnnc.compile)."""
    g, inputs, model, data = case.data.graph, case.inputs, case.model, case.data
    return Prepared(module, lambda x: module(g, x, *inputs), lambda out: model.view(out, data))
