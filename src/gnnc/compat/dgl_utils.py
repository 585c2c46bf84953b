"""``dgl.utils`` under gnnc's DGL alias: the helpers DGL's layer code and tests import from it."""

import torch

from ..nn.conv.common import expand_as_pair

__all__ = ["expand_as_pair", "is_sorted_srcdst"]


def is_sorted_srcdst(src, dst, num_src=None, num_dst=None) -> tuple[bool, bool]:
    """DGL's order check of an edge list: (whether ``src`` ascends, whether it does and ``dst`` ascends within
    each run of one source). ``num_src`` / ``num_dst`` (DGL's node counts) do not change the answer."""
    src, dst = torch.as_tensor(src).long(), torch.as_tensor(dst).long()
    src_sorted = bool((src[1:] >= src[:-1]).all())
    same = src[1:] == src[:-1]
    return src_sorted, src_sorted and bool((dst[1:][same] >= dst[:-1][same]).all())
