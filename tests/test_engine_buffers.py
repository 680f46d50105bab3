"""Gradient buffers: how the engine sums the gradients reaching a node, when it may add into a sum in place, when a
leaf takes its gradient over without a copy, and that the buffers let go of gradients as the pass runs.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from conftest import run_both

import trainkit
from trainkit.autograd.grad_buffer import GradBuffer

# ------------------------------------------------------------------------------------------------- GradBuffer


def test_the_first_gradient_is_kept_as_it_arrives_and_not_owned():
    g = np.ones(3, np.float32)
    buffer = GradBuffer(1)
    buffer.add(0, g, create=False)
    assert buffer.grads[0] is g and 0 not in buffer.owned


def test_a_sum_is_a_new_array_then_later_gradients_are_added_into_it():
    first, second, third = (np.full(3, v, np.float32) for v in (1.0, 2.0, 4.0))
    buffer = GradBuffer(1)
    for g in (first, second):
        buffer.add(0, g, create=False)
    total = buffer.grads[0]
    assert total is not first and total is not second and 0 in buffer.owned
    buffer.add(0, third, create=False)
    assert buffer.grads[0] is total  # added in place
    np.testing.assert_array_equal(total, [7.0, 7.0, 7.0])
    np.testing.assert_array_equal(first, [1.0, 1.0, 1.0])  # the arrays handed in are left as they were
    np.testing.assert_array_equal(second, [2.0, 2.0, 2.0])


def test_one_element_sums_are_new_arrays_each_time():
    buffer = GradBuffer(1)
    for v in (1.0, 2.0, 3.0):
        before = buffer.grads[0]
        buffer.add(0, np.array([v], np.float32), create=False)
        assert buffer.grads[0] is not before
    np.testing.assert_array_equal(buffer.grads[0], [6.0])


def test_sums_of_tensors_are_never_added_into():
    a, b, c = (trainkit.tensor([v], requires_grad=True) for v in (1.0, 2.0, 3.0))
    buffer = GradBuffer(1)
    for t in (a * 1, b * 1, c * 1):
        before = buffer.grads[0]
        buffer.add(0, t, create=True)
        assert buffer.grads[0] is not before
    assert not buffer.owned and buffer.grads[0].requires_grad
    assert buffer.grads[0].tolist() == [6.0]


def test_each_output_has_its_own_sum():
    buffer = GradBuffer(3)
    buffer.add(2, np.ones(2), create=False)
    buffer.add(2, np.ones(2), create=False)
    buffer.add(0, np.zeros(2), create=False)
    assert buffer.grads[1] is None and buffer.owned == {2}
    np.testing.assert_array_equal(buffer.grads[2], [2.0, 2.0])


# ------------------------------------------------------------------------------------------------ in the engine


@pytest.mark.parametrize("uses", [2, 3, 5])
def test_a_leaf_used_several_times_gets_the_sum_and_the_shared_gradient_is_untouched(torch, uses):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x
        for _ in range(uses - 1):
            y = y + x  # AddBackward0 hands the same gradient to both its inputs
        y.retain_grad()
        (y * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        return x.grad.tolist(), y.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_sums_on_a_non_leaf_feed_its_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([0.5, -1.0], requires_grad=True)
        h = x.exp()
        (h * 2 + h * 3 + h.sin()).sum().backward()
        return x.grad.tolist()

    got, expected = run_both(torch, snippet)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_seeds_for_the_same_output_are_summed(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        seed = lib.tensor([1.0, 1.0])
        lib.autograd.backward([y, y, y], [seed, seed * 2, seed * 4])
        return x.grad.tolist(), seed.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def _returns_new_array(made: list):
    """A Function whose backward returns a fresh array, remembered (weakly) in ``made``."""

    class Double(trainkit.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            out = trainkit.from_numpy(g.numpy() * 2)
            made.append(weakref.ref(out.numpy()))
            return out

    return Double


def test_a_sum_reaching_a_leaf_is_taken_over_and_adds_in_place_on_the_next_pass():
    made = []
    double = _returns_new_array(made)
    x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    (double.apply(x) + double.apply(x)).sum().backward()
    grad = x.grad
    assert grad.numpy().base is None and grad.numpy().flags.writeable
    assert all(ref() is None for ref in made)  # the parts of the sum are gone, nothing copied them
    (double.apply(x) * 3).sum().backward()
    assert x.grad is grad
    assert x.grad.tolist() == [10.0, 10.0]


def test_a_gradient_held_elsewhere_is_copied_into_the_leaf():
    kept = []

    class Keep(trainkit.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            out = trainkit.from_numpy(g.numpy() * 5)
            kept.append(out.numpy())
            return out

    x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    Keep.apply(x).sum().backward()
    assert not np.shares_memory(x.grad.numpy(), kept[0])
    kept[0][:] = 0
    assert x.grad.tolist() == [5.0, 5.0]


def test_buffers_let_go_of_gradients_as_the_pass_runs():
    made = []
    seen_alive = []

    class Probe(trainkit.autograd.Function):
        """Runs last: by then the gradients the nodes above it consumed must be gone."""

        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            seen_alive.append([ref() is not None for ref in made])
            return g

    double = _returns_new_array(made)
    x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    double.apply(double.apply(double.apply(Probe.apply(x)))).sum().backward()
    # the newest Double's gradient went into the middle one, consumed; only the last one's is still on its way
    assert seen_alive == [[False, False, True]]
    assert x.grad.tolist() == [8.0, 8.0]
