"""``permute_rows``: a permutation of rows whose gradient is the inverse permutation's gather."""

from __future__ import annotations

import pytest
import torch

from gnnc.graph.permutation import inverse_permutation, permute_rows

from .graphs import random_heterograph


@pytest.mark.parametrize("rows", [0, 1, 7, 50])
@pytest.mark.parametrize("known_inverse", [False, True])
def test_rows_and_gradients_of_every_order(rows, known_inverse):
    torch.manual_seed(rows)
    order = torch.randperm(rows)
    x = torch.randn(rows, 3, 2, dtype=torch.float64, requires_grad=True)
    inverse = inverse_permutation(order) if known_inverse else None
    y = permute_rows(x, order, inverse)
    assert torch.equal(y, x.detach()[order])
    assert rows == 0 or type(y.grad_fn).__name__ == "_PermuteRowsBackward"
    assert torch.autograd.gradcheck(lambda t: permute_rows(t, order, inverse), (x,))
    assert torch.autograd.gradgradcheck(lambda t: permute_rows(t, order, inverse) ** 2, (x,))


def test_the_inverse_undoes_the_order():
    order = torch.randperm(40)
    assert torch.equal(order[inverse_permutation(order)], torch.arange(40))


def test_without_gradients_it_is_a_plain_gather():
    x, order = torch.randn(9, 2), torch.randperm(9)
    y = permute_rows(x, order)
    assert y.grad_fn is None and torch.equal(y, x[order])


def test_edge_data_round_trips_between_user_and_internal_order_with_gradients():
    """The graph's permutations (an unsorted edge list has both orders): to user order and back is the
    identity, gradients included, over the whole graph and over each relation's block."""
    index = random_heterograph(edges_per_relation=30).index
    assert index.user_eid is not None, "the test needs edges given out of destination order"
    x = torch.randn(index.num_edges, 4, dtype=torch.float64, requires_grad=True)
    blocks = [(0, index.num_edges)] + [index.rel_range(r) for r in range(len(index.etypes))]
    for lo, hi in blocks:
        part = x[lo:hi]
        user = index.to_user_order(part, lo, hi)
        back = index.from_user_order(user, lo, hi)
        assert torch.equal(back, part)
        weights = torch.arange(hi - lo, dtype=x.dtype).view(-1, 1)
        (grad,) = torch.autograd.grad((user * weights).sum(), x)
        want = torch.zeros_like(x)
        want[lo:hi] = index.from_user_order(weights.expand(-1, 4), lo, hi)
        assert torch.equal(grad, want)
