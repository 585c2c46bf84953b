"""Random test graphs with the awkward cases every compiled path must survive.

Every graph made here has nodes with zero in-degree, self loops and
multi-edges; heterogeneous ones also have an empty relation and a node type
with a single node.
"""

from __future__ import annotations

import torch

import gnnc


def random_homograph(num_nodes: int = 12, num_edges: int = 40, seed: int = 0) -> gnnc.Graph:
    """Homogeneous graph; the last quarter of the nodes gets no in-edges."""
    gen = torch.Generator().manual_seed(seed)
    receivers = max(1, (3 * num_nodes) // 4)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, receivers, (num_edges,), generator=gen)
    loops = torch.arange(min(3, receivers))
    dups_src, dups_dst = src[:3], dst[:3]  # multi-edges
    src = torch.cat([src, loops, dups_src])
    dst = torch.cat([dst, loops, dups_dst])
    return gnnc.graph((src, dst), num_nodes=num_nodes)


def random_heterograph(seed: int = 0, sizes=None, edges_per_relation: int = 25) -> gnnc.Graph:
    """Three node types ('user', 'item', 'tag' with one node) and five relations.

    ('user', 'likes', 'item') is given unsorted with duplicates and
    ('item', 'tagged', 'tag') sends everything to the single tag node;
    ('tag', 'empty', 'user') has no edges; ('user', 'follows', 'user')
    has self loops; 'item' nodes past the first half receive nothing.
    """
    sizes = sizes or {"user": 9, "item": 7, "tag": 1}
    gen = torch.Generator().manual_seed(seed)

    def rand(n_src, n_dst, m):
        return (torch.randint(0, n_src, (m,), generator=gen), torch.randint(0, n_dst, (m,), generator=gen))

    nu, ni, nt = sizes["user"], sizes["item"], sizes["tag"]
    likes_src, likes_dst = rand(nu, max(1, ni // 2), edges_per_relation)
    likes = (torch.cat([likes_src, likes_src[:4]]), torch.cat([likes_dst, likes_dst[:4]]))
    follows_src, follows_dst = rand(nu, nu, edges_per_relation)
    loops = torch.arange(min(3, nu))
    follows = (torch.cat([follows_src, loops]), torch.cat([follows_dst, loops]))
    data = {
        ("user", "likes", "item"): likes,
        ("item", "tagged", "tag"): rand(ni, nt, edges_per_relation // 2),
        ("tag", "empty", "user"): ([], []),
        ("user", "follows", "user"): follows,
        ("item", "liked_by", "user"): rand(ni, max(1, nu - 2), edges_per_relation),
    }
    return gnnc.heterograph(data, num_nodes=dict(sizes))
