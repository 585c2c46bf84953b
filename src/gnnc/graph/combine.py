"""DGL's merge of the features of several types into one (``combine_frames``): what ``to_homogeneous`` and
a flattened relation slice carry over."""

from __future__ import annotations

import torch


def combine_features(frames, names=None) -> dict:
    """``{name: rows of every frame, concatenated in frame order}`` over ``frames``, ``(features, rows)`` per
    type. Frames without rows are skipped. The names are ``names`` (each must be in the first frame with rows;
    KeyError otherwise), else every feature of that frame, less those a later frame lacks, as DGL's; a name
    held with two dtypes or row shapes raises ValueError."""
    frames = [features for features, rows in frames if rows]
    if not frames:
        return {}
    first = frames[0]
    for name in names or ():
        if name not in first:
            raise KeyError(f"node or edge feature {name!r} is missing on the first type with rows")
    common = {name: _scheme(first[name]) for name in (first if names is None else names)}
    for frame in frames[1:]:
        for name, scheme in list(common.items()):
            if name not in frame:
                del common[name]
            elif _scheme(frame[name]) != scheme:
                raise ValueError(
                    f"Cannot concatenate column {name} with shape {_scheme(frame[name])} and shape {scheme}"
                )
    return {name: torch.cat([frame[name] for frame in frames]) for name in common}


def _scheme(value: torch.Tensor):
    return tuple(value.shape[1:]), value.dtype
