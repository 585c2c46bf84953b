"""What a resumed training run checks and restores besides its modules: the configuration a checkpoint was
written by (``config_differences``) and the random streams (``random_state`` / ``load_random_state``). Shared
by the single-process and the distributed trainers."""

from __future__ import annotations

import torch


def config_differences(saved: dict, current: dict) -> list[str]:
    """``"key: checkpoint X, this run Y"`` for every key of ``current`` whose value ``saved`` does not share."""
    return [f"{k}: checkpoint {saved.get(k)!r}, this run {v!r}" for k, v in current.items() if saved.get(k) != v]


def random_state(sampler, shuffle: torch.Generator) -> dict:
    """The random streams a training run draws from: the sampler's, the shuffling generator and torch's."""
    return {"sampler": sampler.state_dict(), "shuffle": shuffle.get_state(), "torch_rng": torch.get_rng_state()}


def load_random_state(state: dict, sampler, shuffle: torch.Generator) -> None:
    """Restore what ``random_state`` saved."""
    sampler.load_state_dict(state["sampler"])
    shuffle.set_state(state["shuffle"])
    torch.set_rng_state(state["torch_rng"])
