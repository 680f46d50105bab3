"""The backward engine and memory, compared with PyTorch: deep graphs, each node once, freed saved tensors, no
reference cycles, gradient buffers taken over or copied, and second derivatives.
"""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest
from conftest import assert_same_error, run_both, to_numpy

import trainkit

# ------------------------------------------------------------------------------------------------------ helpers


def weak_refs(*objects) -> list:
    """Weak references to those of ``objects`` that support them (torch's graph nodes do not)."""
    refs = []
    for obj in objects:
        try:
            refs.append(weakref.ref(obj))
        except TypeError:
            pass
    return refs


def address(lib, t) -> int:
    """Where a CPU tensor's elements start in memory."""
    if lib is trainkit:
        return t.numpy().ctypes.data
    return t.data_ptr()


@pytest.fixture
def gc_off():
    """Only reference counting frees objects while a test runs: a reference cycle would keep them alive."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ------------------------------------------------------------------------------------------------- deep graphs

CHAIN = 100_000


def test_chain_of_100k_ops_backwards_without_recursion_error(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([0.5, -1.0], device=dev, requires_grad=True)
        y = x
        for i in range(CHAIN):
            y = y + 1 if i % 2 else y * 1.0
        (y * y).sum().backward()
        return to_numpy(y), to_numpy(x.grad)

    (y, g), (ey, eg) = run_both(torch, snippet, device)
    np.testing.assert_allclose(y, ey, rtol=1e-6)
    np.testing.assert_allclose(g, eg, rtol=1e-6)


def test_chain_of_100k_ops_through_autograd_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([2.0], requires_grad=True)
        y = x
        for _ in range(CHAIN):
            y = y - 0.0
        (g,) = lib.autograd.grad((y * 3).sum(), x)
        return g.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_dropping_a_chain_of_100k_ops_without_backward(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x
        for _ in range(CHAIN):
            y = y * 1.0
        tail = weak_refs(y)
        del y
        return [r() is None for r in tail], x.grad is None

    got, expected = run_both(torch, snippet)
    assert got == expected


def _diamonds(lib, counter_cls, x, n: int):
    a = x
    for _ in range(n):
        a = counter_cls.apply(a)
        left = a * 2
        right = a.tanh()
        a = left + right * 0.5 + a
    return a


def _counter_function(lib, calls: list):
    class Count(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            calls.append(to_numpy(g).copy())
            return g

    return Count


def test_each_node_runs_once_in_diamond_graphs(torch, device):
    def snippet(lib, dev):
        calls = []
        count = _counter_function(lib, calls)
        x = lib.tensor([0.1, -0.2, 0.3], device=dev, requires_grad=True)
        _diamonds(lib, count, x, 4).sum().backward()
        return calls, to_numpy(x.grad)

    (calls, g), (ecalls, eg) = run_both(torch, snippet, device)
    assert len(calls) == len(ecalls) == 4
    for a, b in zip(calls, ecalls):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    np.testing.assert_allclose(g, eg, rtol=1e-5)


def test_node_shared_by_several_roots_runs_once(torch):
    def snippet(lib, dev):
        calls = []
        count = _counter_function(lib, calls)
        x = lib.tensor([1.0, -1.0], requires_grad=True)
        a = count.apply(x)
        y1 = (a * 2).sum()
        y2 = (a.exp() * 3).sum()
        lib.autograd.backward([y1, y2])
        return calls, to_numpy(x.grad)

    (calls, g), (ecalls, eg) = run_both(torch, snippet)
    assert len(calls) == len(ecalls) == 1
    np.testing.assert_allclose(calls[0], ecalls[0], rtol=1e-6)
    np.testing.assert_allclose(g, eg, rtol=1e-6)


def test_prehook_on_a_shared_node_runs_once(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a = x * 3
        a.grad_fn.register_prehook(lambda grads: seen.append([to_numpy(g).tolist() for g in grads]))
        b = a * a
        c = a + b + a.tanh()
        c.sum().backward()
        return seen, to_numpy(x.grad)

    (seen, g), (eseen, eg) = run_both(torch, snippet)
    assert len(seen) == len(eseen) == 1
    np.testing.assert_allclose(seen[0], eseen[0], rtol=1e-5)
    np.testing.assert_allclose(g, eg, rtol=1e-5)


def test_prehook_on_accumulate_grad_survives_a_later_leaf_hook(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        acc = y.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda grads: seen.append(("prehook", to_numpy(grads[0]).tolist())))
        x.register_hook(lambda g: seen.append(("tensor hook", to_numpy(g).tolist())))
        y.sum().backward()
        return sorted(seen), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("leaf", [True, False])
def test_hook_on_tensor_used_twice_runs_once_with_the_total(torch, leaf):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        t = x if leaf else x * 1
        t.register_hook(lambda g: seen.append(to_numpy(g).tolist()))
        (t * 2 + t.exp() + t * t).sum().backward()
        return seen, to_numpy(x.grad)

    (seen, g), (eseen, eg) = run_both(torch, snippet)
    assert len(seen) == len(eseen) == 1
    np.testing.assert_allclose(seen[0], eseen[0], rtol=1e-6)
    np.testing.assert_allclose(g, eg, rtol=1e-6)


def test_independent_branches_run_newest_first(torch):
    def snippet(lib, dev):
        order = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        first = x * 2
        second = x * 3
        third = x * 4
        for name, t in (("first", first), ("second", second), ("third", third)):
            t.register_hook(lambda g, name=name: order.append(name))
        (first + third + second).sum().backward()
        return order

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_node_post_hook_sees_grad_inputs_and_outputs(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        y = x * w

        def post(grad_inputs, grad_outputs):
            seen.append(([to_numpy(g).tolist() for g in grad_inputs], [to_numpy(g).tolist() for g in grad_outputs]))

        y.grad_fn.register_hook(post)
        (y * 2).sum().backward()
        return seen

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_mode_inside_hooks_and_custom_backward_follows_create_graph(torch, create_graph):
    def snippet(lib, dev):
        seen = {}

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * t

            @staticmethod
            def backward(ctx, g):
                seen["function backward"] = lib.is_grad_enabled()
                (t,) = ctx.saved_tensors
                return 2 * t * g

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Square.apply(x)
        y.register_hook(lambda g: seen.__setitem__("tensor hook", lib.is_grad_enabled()))
        total = y.sum()
        with lib.no_grad():
            (g,) = lib.autograd.grad(total, x, create_graph=create_graph)
        seen["after"] = lib.is_grad_enabled()
        return seen, g.requires_grad, g.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_backward_under_no_grad_still_computes_grads(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        with lib.no_grad():
            y.backward()
            mode = lib.is_grad_enabled()
        return x.grad.tolist(), mode, lib.is_grad_enabled()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_exception_in_hook_propagates_and_restores_grad_mode(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2

        def bad(g):
            raise ValueError("hook refused the gradient")

        y.register_hook(bad)
        try:
            lib.autograd.grad(y.sum(), x, create_graph=True)
        except ValueError as err:
            return str(err), lib.is_grad_enabled(), x.grad
        return None

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == "hook refused the gradient"


def test_linear_gradient_with_create_graph_does_not_require_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (linear,) = lib.autograd.grad((x * 3).sum(), x, create_graph=True)
        (square,) = lib.autograd.grad((x * x).sum(), x, create_graph=True)
        return linear.requires_grad, linear.tolist(), square.requires_grad, square.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_backward_with_create_graph_gives_differentiable_grads(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        y.retain_grad()
        z = (y * y).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z.backward(create_graph=True)
        flags = (x.grad.requires_grad, y.grad.requires_grad)
        values = (x.grad.tolist(), y.grad.tolist())
        (gg,) = lib.autograd.grad(x.grad.sum(), x)
        return flags, values, gg.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


# ----------------------------------------------------------------------------------------- saved tensors freed


def test_saved_tensors_are_freed_by_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).sum()
        y.backward()
        y.backward()

    assert_same_error(torch, snippet, "backward through the graph a second time", "freed")


def test_reading_saved_tensors_of_a_custom_function_after_backward_raises(torch):
    def snippet(lib, dev):
        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * t

            @staticmethod
            def backward(ctx, g):
                (t,) = ctx.saved_tensors
                return 2 * t * g

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = Square.apply(x)
        y.sum().backward()
        return y.grad_fn.saved_tensors

    assert_same_error(torch, snippet, "saved tensors after they have already been freed")


def _function_saving_an_intermediate(lib, refs: dict):
    class ScaledExp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            scale = t * 2 + 1
            ctx.save_for_backward(scale)
            refs["scale"] = weakref.ref(scale)
            if lib is trainkit:
                refs["array"] = weakref.ref(scale.numpy())
            return t * scale

        @staticmethod
        def backward(ctx, g):
            (scale,) = ctx.saved_tensors
            return g * (2 * scale - 1)

    return ScaledExp


@pytest.mark.parametrize("retain_graph", [False, True])
def test_saved_intermediate_of_custom_function_is_released_after_backward(torch, retain_graph):
    def snippet(lib, dev):
        refs = {}
        fn = _function_saving_an_intermediate(lib, refs)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = fn.apply(x).sum()
        alive_before = {k: r() is not None for k, r in refs.items()}
        y.backward(retain_graph=retain_graph)
        alive_after = {k: r() is not None for k, r in refs.items()}
        return alive_before, alive_after, to_numpy(x.grad).tolist(), y.grad_fn is not None

    (before, after, g, has_fn), (ebefore, eafter, eg, ehas_fn) = run_both(torch, snippet)
    assert before["scale"] == ebefore["scale"] is True
    assert after["scale"] == eafter["scale"] == retain_graph
    assert before["array"] is True
    assert after["array"] == retain_graph
    assert g == eg
    assert has_fn and ehas_fn


def test_saved_input_of_built_in_op_is_released_after_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mid = x * 3
        z = (mid * mid).sum()
        refs = weak_refs(mid)
        del mid
        before = [r() is not None for r in refs]
        z.backward()
        after = [r() is not None for r in refs]
        return before, after

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got == ([True], [False])


# -------------------------------------------------------------------------------------------- reference cycles


def _graph_plain(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([0.5, -1.0], requires_grad=True)
    mid = (x * w).exp()
    y = (mid * x + w).sum()
    keep += [x, w, mid, y, y.grad_fn, mid.grad_fn, mid.grad_fn.next_functions[0][0]]


def _graph_retain_grad(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    mid = x * 2
    mid.retain_grad()
    y = (mid * mid).sum()
    keep += [x, mid, y, y.grad_fn, mid.grad_fn]


def _graph_hooks(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    mid = x * 2
    mid.register_hook(lambda g: g * 2)
    x.register_hook(lambda g: g + 1)
    y = (mid * mid).sum()
    y.grad_fn.register_prehook(lambda grads: None)
    mid.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    keep += [x, mid, y, y.grad_fn, mid.grad_fn]


def _graph_custom_function_saving_output(lib, keep: list):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            out = t.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return g * out

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    out = Exp.apply(x)
    y = (out * 2).sum()
    keep += [x, out, y, out.grad_fn, y.grad_fn]


def _graph_custom_function_saving_input_and_output(lib, keep: list):
    class MulExp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t, s):
            out = (t * s).exp()
            ctx.save_for_backward(t, s, out)
            ctx.note = "kept on ctx"
            return out

        @staticmethod
        def backward(ctx, g):
            t, s, out = ctx.saved_tensors
            return g * out * s, g * out * t

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    s = lib.tensor([0.5, 0.25], requires_grad=True)
    out = MulExp.apply(x * 1, s)
    keep += [x, s, out, out.grad_fn]


def _graph_in_place(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    mid = x * 2
    mid.add_(1)
    mid.mul_(x)
    plain = lib.zeros(3)
    plain[1:] = mid
    y = plain.sum()
    keep += [x, mid, plain, y, mid.grad_fn, plain.grad_fn, y.grad_fn]


def _graph_after_backward(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    mid = (x * x).exp()
    mid.retain_grad()
    mid.register_hook(lambda g: g * 3)
    y = mid.sum()
    y.backward()
    keep += [x, mid, y, x.grad, mid.grad, y.grad_fn, mid.grad_fn]


def _graph_after_backward_retaining_graph(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    mid = (x * x).exp()
    y = mid.sum()
    y.backward(retain_graph=True)
    keep += [x, mid, y, x.grad, y.grad_fn, mid.grad_fn]


def _graph_double_backward(lib, keep: list):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x**3).sum()
    (g,) = lib.autograd.grad(y, x, create_graph=True)
    (h,) = lib.autograd.grad(g.sum(), x, create_graph=True)
    keep += [x, y, g, h, g.grad_fn, h.grad_fn]


def _graph_views(lib, keep: list):
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = x[0]
    t = x.t()
    r = x.reshape(4)
    y = (v * t[1]).sum() + r.sum()
    keep += [x, v, t, r, y, v.grad_fn, y.grad_fn]


GRAPHS = {
    "plain": _graph_plain,
    "retain_grad": _graph_retain_grad,
    "hooks": _graph_hooks,
    "custom_function_saving_output": _graph_custom_function_saving_output,
    "custom_function_saving_input_and_output": _graph_custom_function_saving_input_and_output,
    "in_place": _graph_in_place,
    "after_backward": _graph_after_backward,
    "after_backward_retaining_graph": _graph_after_backward_retaining_graph,
    "double_backward": _graph_double_backward,
    "views": _graph_views,
}


@pytest.mark.parametrize("case", list(GRAPHS))
def test_graph_dies_with_its_tensors_without_the_cycle_collector(torch, gc_off, case):
    def snippet(lib, dev):
        keep: list = []
        GRAPHS[case](lib, keep)
        refs = weak_refs(*keep)
        n_watched = len(keep)
        keep.clear()
        return n_watched, [r() is None for r in refs]

    (n, dead), (_, edead) = run_both(torch, snippet)
    assert all(edead), "the reference keeps part of the graph alive: the snippet is not valid"
    assert len(dead) == n, "every trainkit tensor and graph node should support weak references"
    assert all(dead), f"{dead.count(False)} of {n} objects outlived their graph (reference cycle)"


def test_tensor_hook_does_not_keep_grads_alive(torch):
    def snippet(lib, dev):
        refs = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mid = x * 2
        mid.register_hook(lambda g: refs.append(weakref.ref(g)))
        y = (mid * mid).sum()
        y.backward(retain_graph=True)
        return [r() is None for r in refs], y.grad_fn is not None

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got == ([True], True)


def test_hook_handle_remove_releases_the_hook(torch, gc_off):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mid = x * 2

        def hook(g):
            return g

        def leaf_hook(g):
            return g

        refs = [weakref.ref(hook), weakref.ref(leaf_hook)]
        handles = [mid.register_hook(hook), x.register_hook(leaf_hook)]
        del hook, leaf_hook
        alive = [r() is not None for r in refs]
        for h in handles:
            h.remove()
        return alive, [r() is not None for r in refs], mid.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[1] == [False, False]


# ------------------------------------------------------------------------- gradient buffers: taken over or copied


def _grad_producing_function(lib, where: dict):
    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            out = g * 2
            where["address"] = address(lib, out)
            return out

    return Twice


def test_first_grad_is_taken_over_without_a_copy(torch):
    def snippet(lib, dev):
        where = {}
        twice = _grad_producing_function(lib, where)
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        twice.apply(x).sum().backward()
        return address(lib, x.grad) == where["address"], x.grad._base is None, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is True


def test_first_grad_of_mul_is_not_a_view_and_second_backward_adds_in_place(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        (x * w).sum().backward()
        first = x.grad
        not_view = first._base is None
        owns = first.numpy().base is None if lib is trainkit else True
        first_address = address(lib, first)
        (x * w * 3).sum().backward()
        return not_view, owns, x.grad is first, address(lib, x.grad) == first_address, first.tolist(), w.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_held_by_leaf_hook_is_copied_before_accumulation(torch):
    def snippet(lib, dev):
        stored = []
        where = {}
        twice = _grad_producing_function(lib, where)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g: stored.append(g))
        twice.apply(x).sum().backward()
        taken_over = address(lib, x.grad) == address(lib, stored[0])
        twice.apply(x * 5).sum().backward()
        return taken_over, [s.tolist() for s in stored], x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is False


def test_grad_held_by_non_leaf_hook_is_copied_before_accumulation(torch):
    def snippet(lib, dev):
        stored = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x + 0
        y.register_hook(lambda g: stored.append(g))
        (y * lib.tensor([3.0, 4.0])).sum().backward()
        first = x.grad.tolist()
        (x * 10).sum().backward()
        x.grad.add_(100)
        return first, stored[0].tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_retained_grad_and_leaf_grad_do_not_share_memory(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x + 0
        y.retain_grad()
        (y * lib.tensor([3.0, 4.0])).sum().backward()
        x.grad.add_(5)
        first = y.grad.tolist()
        y.grad.mul_(2)
        return first, y.grad.tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_two_leaves_fed_the_same_grad_do_not_share_memory(torch):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        c = lib.tensor([5.0, 6.0], requires_grad=True)
        ((a + b - c) * lib.tensor([2.0, 3.0])).sum().backward()
        a.grad.add_(1)
        c.grad.mul_(10)
        return a.grad.tolist(), b.grad.tolist(), c.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_explicit_gradient_is_not_aliased_by_leaf_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        v = lib.tensor([3.0, 4.0])
        x.clone().backward(v)
        v.add_(1)
        after_v = x.grad.tolist()
        x.grad.mul_(2)
        return after_v, v.tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_sum_backward_twice_on_same_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.sum().backward()
        first = x.grad.tolist()
        x.sum().backward()
        x.mean().backward()
        y = x.sum() + x.sum()
        y.backward()
        return first, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    np.testing.assert_allclose(got[0], expected[0])
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)


def test_broadcast_grad_accumulates_correctly(torch):
    def snippet(lib, dev):
        b = lib.tensor([1.0, 2.0], requires_grad=True)
        x = lib.ones(3, 2)
        (x + b).sum().backward()
        first = b.grad.tolist()
        ((x * 2) * b).sum().backward()
        return first, b.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_manual_grad_then_backward_accumulates(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mine = lib.tensor([10.0, 20.0])
        x.grad = mine
        (x * 3).sum().backward()
        return x.grad.tolist(), mine.tolist(), x.grad is mine

    got, expected = run_both(torch, snippet)
    assert got == expected


# ----------------------------------------------------------------------------------------- second derivatives


def test_hessian_vector_product_matches_torch(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([0.5, -1.0, 2.0], device=dev, requires_grad=True)
        y = lib.tensor([1.5, 0.25, -0.75], device=dev, requires_grad=True)
        v = lib.tensor([1.0, 2.0, -1.0], device=dev)
        u = lib.tensor([0.5, -0.5, 3.0], device=dev)
        f = (x**3).sum() + (x * y).sum()
        gx, gy = lib.autograd.grad(f, [x, y], create_graph=True)
        first = (to_numpy(gx), to_numpy(gy), gx.requires_grad)
        hx, hy = lib.autograd.grad((gx * v).sum() + (gy * u).sum(), [x, y])
        return first, to_numpy(hx), to_numpy(hy), hx.requires_grad

    got, expected = run_both(torch, snippet, device)
    (gx, gy, gflag), hx, hy, hflag = got
    (egx, egy, egflag), ehx, ehy, ehflag = expected
    np.testing.assert_allclose(gx, egx, rtol=1e-6)
    np.testing.assert_allclose(gy, egy, rtol=1e-6)
    np.testing.assert_allclose(hx, ehx, rtol=1e-6)
    np.testing.assert_allclose(hy, ehy, rtol=1e-6)
    assert (gflag, hflag) == (egflag, ehflag)


def test_third_derivative_matches_torch(torch):
    def snippet(lib, dev):
        x = lib.tensor([0.3, -0.7], requires_grad=True)
        f = (x.exp() * x**2).sum()
        (g1,) = lib.autograd.grad(f, x, create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = lib.autograd.grad(g2.sum(), x)
        return [to_numpy(g) for g in (g1, g2, g3)]

    got, expected = run_both(torch, snippet)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_double_backward_through_backward_with_create_graph(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([0.5, -0.5], requires_grad=True)
        loss = ((x * w).tanh() ** 2).sum()
        (gx,) = lib.autograd.grad(loss, x, create_graph=True)
        penalty = (gx**2).sum()
        penalty.backward()
        return to_numpy(gx), to_numpy(x.grad), to_numpy(w.grad)

    got, expected = run_both(torch, snippet)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def _view_returning_function(kept: list):
    """A Function whose backward returns a C-ordered view of the whole of a new array, keeping that array in
    ``kept`` when asked to (so that the view's memory is held elsewhere)."""

    class ViewGrad(trainkit.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            base = (g.numpy() * 2).reshape(-1)
            if kept is not None:
                kept.append(base)
            return trainkit.from_numpy(base.reshape(g.shape))

    return ViewGrad


@pytest.mark.parametrize("held", [False, True])
def test_a_view_grad_is_taken_over_only_when_nothing_else_holds_its_memory(held):
    kept = [] if held else None
    x = trainkit.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    _view_returning_function(kept).apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 2.0, dtype=np.float32))
    if held:  # a copy: changing the kept array must not change the grad
        assert not np.shares_memory(x.grad.numpy(), kept[0])
        kept[0][:] = 0
        np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 2.0, dtype=np.float32))


def test_linear_weight_grad_is_c_ordered_and_accumulates_in_place(torch):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (3, 5), (3,)))
    tw, tb = trainkit.tensor(w, requires_grad=True), trainkit.tensor(b, requires_grad=True)
    trainkit.nn.functional.linear(trainkit.tensor(x), tw, tb).sum().backward()
    first = tw.grad
    assert first.numpy().flags.c_contiguous and first.is_contiguous()
    trainkit.nn.functional.linear(trainkit.tensor(x), tw, tb).sum().backward()
    assert tw.grad is first
    pw = torch.tensor(w, requires_grad=True)
    for _ in range(2):
        torch.nn.functional.linear(torch.tensor(x), pw, torch.tensor(b)).sum().backward()
    np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_a_broadcast_grad_is_copied_so_the_grad_stays_writable(shape, torch):
    def snippet(lib, dev):
        p = lib.zeros(shape, requires_grad=True)
        p.mean().backward()
        p.mean().backward()  # adds into the first grad in place
        (p.sum() * 2).backward()
        lib.optim.SGD([p], lr=0.1).zero_grad(set_to_none=False)
        return p.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_a_grad_over_memory_someone_else_owns_is_copied():
    buffer = bytearray(48)

    def into_buffer(g):
        a = np.frombuffer(buffer, np.float32).reshape(3, 4)
        a[...] = g.numpy()
        return trainkit.from_numpy(a)

    x = trainkit.randn(3, 4, requires_grad=True)
    x.register_hook(into_buffer)
    (x * 2).sum().backward()
    buffer[:4] = bytes(4)
    assert float(x.grad[0, 0]) == 2.0
