"""Autograd semantics compared with PyTorch: grad mode, leaves, grad_fn graphs, hooks, detach, in-place ops, errors.

Every test runs one snippet on trainkit and on torch and compares what can be observed: values, gradients, flags,
node names, and the type and key words of errors.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from conftest import assert_same_error, run_both, to_numpy

# ------------------------------------------------------------------------------------------------------ helpers


def assert_close(a, b, rtol=1e-5, atol=1e-6):
    if a is None or b is None:
        assert a is None and b is None, f"one is None: {a!r} vs {b!r}"
        return
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol)


def dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def node_name(fn) -> str | None:
    return None if fn is None else type(fn).__name__


def graph_shape(fn, depth: int = 3):
    """A node's ``next_functions`` as nested tuples of (class name, output index, children)."""
    if fn is None or depth == 0:
        return None
    return tuple((node_name(nxt), nr, graph_shape(nxt, depth - 1)) for nxt, nr in fn.next_functions)


def no_warnings(fn):
    """Call ``fn`` and return its result, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


# ---------------------------------------------------------------------------------------- requires_grad and grad mode


@pytest.mark.parametrize("a_requires", [False, True])
@pytest.mark.parametrize("b_requires", [False, True])
@pytest.mark.parametrize("grad_on", [False, True])
def test_requires_grad_propagates_iff_grad_mode_and_some_input(torch, device, a_requires, b_requires, grad_on):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0], device=dev, requires_grad=a_requires)
        b = lib.tensor([3.0, 4.0], device=dev, requires_grad=b_requires)
        with lib.set_grad_enabled(grad_on):
            outs = [a + b, a * b, (a - b).sum(), a.exp() * 2, lib.cat([a, b]), a[0] * b[1]]
        return [(o.requires_grad, o.grad_fn is None, o.is_leaf) for o in outs]

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_no_grad_context_disables_recording(torch):
    def snippet(lib, dev):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            inside = lib.is_grad_enabled()
            y = x * 2
        return inside, lib.is_grad_enabled(), y.requires_grad, y.grad_fn is None, y.is_leaf

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_enable_grad_inside_no_grad_records(torch):
    def snippet(lib, dev):
        x = lib.ones(3, requires_grad=True)
        with lib.no_grad():
            with lib.enable_grad():
                y = x * 2
                mode_inner = lib.is_grad_enabled()
            z = x * 2
            mode_after = lib.is_grad_enabled()
        y.sum().backward()
        return mode_inner, mode_after, y.requires_grad, node_name(y.grad_fn), z.requires_grad, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_set_grad_enabled_as_call(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        try:
            lib.set_grad_enabled(False)
            off = lib.is_grad_enabled()
            y = x * 2
        finally:
            lib.set_grad_enabled(True)
        z = x * 2
        return off, lib.is_grad_enabled(), y.requires_grad, z.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_set_grad_enabled_as_context_restores_previous_mode(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        with lib.set_grad_enabled(False):
            off = lib.is_grad_enabled()
            y = x * 2
            with lib.set_grad_enabled(True):
                on = lib.is_grad_enabled()
                z = x * 2
            back_off = lib.is_grad_enabled()
        return off, on, back_off, lib.is_grad_enabled(), y.requires_grad, z.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_set_grad_enabled_as_decorator(torch):
    def snippet(lib, dev):
        @lib.set_grad_enabled(False)
        def f(x):
            return x * 2, lib.is_grad_enabled()

        mode_after_decoration = lib.is_grad_enabled()
        x = lib.ones(2, requires_grad=True)
        y, mode_inside = f(x)
        return mode_after_decoration, mode_inside, lib.is_grad_enabled(), y.requires_grad, f.__name__

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_no_grad_and_enable_grad_as_decorators(torch):
    def snippet(lib, dev):
        @lib.no_grad()
        def frozen(x):
            return x * 2

        @lib.enable_grad()
        def tracked(x):
            return x * 2

        x = lib.ones(2, requires_grad=True)
        a = frozen(x)
        with lib.no_grad():
            b = tracked(x)
            c = frozen(x)
        return a.requires_grad, b.requires_grad, c.requires_grad, lib.is_grad_enabled(), frozen.__name__

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_bare_no_grad_decorator(torch):
    def snippet(lib, dev):
        @lib.no_grad
        def frozen(x):
            return x * 2, lib.is_grad_enabled()

        x = lib.ones(2, requires_grad=True)
        y, mode = frozen(x)
        return y.requires_grad, mode, lib.is_grad_enabled(), frozen.__name__

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_mode_is_thread_local(torch):
    def snippet(lib, dev):
        seen = {}
        x = lib.ones(2, requires_grad=True)

        def worker():
            seen["mode"] = lib.is_grad_enabled()
            seen["requires_grad"] = (x * 2).requires_grad

        with lib.no_grad():
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            main_mode = lib.is_grad_enabled()
        return seen["mode"], seen["requires_grad"], main_mode

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got == (True, True, False)


def test_no_grad_inside_a_thread_leaves_other_threads_alone(torch):
    def snippet(lib, dev):
        seen = {}
        ready = threading.Event()
        release = threading.Event()
        x = lib.ones(2, requires_grad=True)

        def worker():
            with lib.no_grad():
                seen["worker"] = lib.is_grad_enabled()
                ready.set()
                release.wait(5)

        t = threading.Thread(target=worker)
        t.start()
        ready.wait(5)
        seen["main"] = lib.is_grad_enabled()
        seen["main_op"] = (x * 2).requires_grad
        release.set()
        t.join()
        return seen

    got, expected = run_both(torch, snippet)
    assert got == expected


# ------------------------------------------------------------------------------------------------------- leaves


def test_leaf_flags(torch, device):
    def snippet(lib, dev):
        plain = lib.tensor([1.0, 2.0], device=dev)
        param = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        inner = param * 2
        detached = inner.detach()
        made_by_op_without_grad = plain * 2
        return [
            (t.is_leaf, t.requires_grad, t.grad_fn is None)
            for t in (plain, param, inner, detached, made_by_op_without_grad)
        ]

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_grad_of_leaf_is_none_before_backward_without_warning(torch):
    def snippet(lib, dev):
        plain = lib.ones(2)
        param = lib.ones(2, requires_grad=True)
        return no_warnings(lambda: (plain.grad, param.grad))

    got, expected = run_both(torch, snippet)
    assert got == expected == (None, None)


def test_grad_accumulates_across_backward_calls(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, -2.0, 3.0], device=dev, requires_grad=True)
        (x * x).sum().backward()
        first = to_numpy(x.grad).copy()
        (x * 3).sum().backward()
        return first, to_numpy(x.grad)

    (g1, g2), (e1, e2) = run_both(torch, snippet, device)
    np.testing.assert_allclose(g1, e1)
    np.testing.assert_allclose(g2, e2)


def test_non_leaf_grad_is_none_and_warns(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.sum().backward()
        with pytest.warns(UserWarning) as record:
            g = y.grad
        return g, str(record[0].message)

    (g, msg), (eg, emsg) = run_both(torch, snippet)
    assert g is None and eg is None
    for word in ("not a leaf", "retain_grad"):
        assert word in emsg
        assert word in msg


def test_retain_grad_before_backward_keeps_grad_without_warning(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        y = x * x
        y.retain_grad()
        (y * 3).sum().backward()
        return no_warnings(lambda: y.grad), y.retains_grad, x.grad

    (g, flag, xg), (eg, eflag, exg) = run_both(torch, snippet, device)
    assert_close(g, eg)
    assert_close(xg, exg)
    assert flag == eflag is True


def test_retains_grad_flag(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        before = y.retains_grad
        y.retain_grad()
        y.retain_grad()
        after = y.retains_grad
        (y * 3).sum().backward()
        return before, after, x.retains_grad, (x * 3).retains_grad, y.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_retain_grad_on_leaf_is_a_no_op(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.retain_grad()
        (x * x).sum().backward()
        return x.retains_grad, x.is_leaf, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_retain_grad_accumulates_over_two_backward_calls(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        y = x * x
        y.retain_grad()
        z = (y * lib.tensor([2.0, 5.0], device=dev)).sum()
        z.backward(retain_graph=True)
        first = to_numpy(y.grad).copy()
        z.backward()
        return first, to_numpy(y.grad), to_numpy(x.grad)

    got, expected = run_both(torch, snippet, device)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b)


# ------------------------------------------------------------------------------------------------------ grad_fn

GRAD_FN_CASES = {
    "mul": lambda lib, x, w: x * w,
    "add": lambda lib, x, w: x + w,
    "sub": lambda lib, x, w: x - w,
    "div": lambda lib, x, w: x / w,
    "neg": lambda lib, x, w: -x,
    "pow_scalar": lambda lib, x, w: x**2,
    "exp": lambda lib, x, w: x.exp(),
    "log": lambda lib, x, w: w.log(),
    "sum_all": lambda lib, x, w: x.sum(),
    "sum_dim": lambda lib, x, w: x.sum(0),
    "mean_all": lambda lib, x, w: x.mean(),
    "mean_dim": lambda lib, x, w: x.mean(1),
    "relu": lambda lib, x, w: x.relu(),
    "sigmoid": lambda lib, x, w: x.sigmoid(),
    "tanh": lambda lib, x, w: x.tanh(),
    "softmax": lambda lib, x, w: x.softmax(-1),
    "log_softmax": lambda lib, x, w: x.log_softmax(-1),
    "mm": lambda lib, x, w: x @ w.t(),
    "t": lambda lib, x, w: x.t(),
    "transpose": lambda lib, x, w: x.transpose(0, 1),
    "permute": lambda lib, x, w: x.permute(1, 0),
    "unsqueeze": lambda lib, x, w: x.unsqueeze(0),
    "view": lambda lib, x, w: x.view(6),
    "select": lambda lib, x, w: x[0],
    "slice": lambda lib, x, w: x[0:1],
    "index": lambda lib, x, w: x[[0, 1, 0]],
    "clone": lambda lib, x, w: x.clone(),
    "to_double": lambda lib, x, w: x.to(lib.float64),
    "cat": lambda lib, x, w: lib.cat([x, w]),
    "stack": lambda lib, x, w: lib.stack([x, w]),
    "clamp": lambda lib, x, w: x.clamp(0.0, 1.0),
    "abs": lambda lib, x, w: x.abs(),
}


@pytest.mark.parametrize("case", list(GRAD_FN_CASES))
def test_grad_fn_class_name_matches_torch(torch, case):
    def snippet(lib, dev):
        x = lib.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], requires_grad=True)
        w = lib.tensor([[2.0, 1.0, 0.5], [1.5, 3.0, 2.5]], requires_grad=True)
        out = GRAD_FN_CASES[case](lib, x, w)
        return node_name(out.grad_fn), out.grad_fn.name()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_next_functions_structure(torch):
    def snippet(lib, dev):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        c = lib.tensor([5.0, 6.0], requires_grad=True)
        z = (a * b + c).mean()
        return node_name(z.grad_fn), graph_shape(z.grad_fn, depth=4)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_next_functions_of_multi_output_node_carry_output_index(torch):
    def snippet(lib, dev):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        first, second = x.unbind(0)
        y = second * first
        return graph_shape(y.grad_fn, depth=2)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_next_functions_of_custom_multi_output_function(torch):
    def snippet(lib, dev):
        class Halves(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                return ga * 2 + gb * 3

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = Halves.apply(x)
        y = b * a
        fns = y.grad_fn.next_functions
        return graph_shape(y.grad_fn, depth=2), fns[0][0] is fns[1][0], (a.grad_fn is b.grad_fn)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_accumulate_grad_variable_is_the_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        acc = y.grad_fn.next_functions[0][0]
        return node_name(acc), acc.variable is x, acc.next_functions

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[1] is True


def test_two_ops_on_a_leaf_reach_the_same_accumulate_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y1 = x * 2
        y2 = x + 1
        return y1.grad_fn.next_functions[0][0] is y2.grad_fn.next_functions[0][0]

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got is True


# -------------------------------------------------------------------------------------------------- tensor hooks


def test_hooks_run_in_registration_order_each_on_previous_result(torch, device):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        y = x * 3

        def first(g):
            seen.append(("first", to_numpy(g).tolist()))
            return g * 2

        def second(g):
            seen.append(("second", to_numpy(g).tolist()))
            return g + 1

        def third(g):
            seen.append(("third", to_numpy(g).tolist()))

        y.register_hook(first)
        y.register_hook(second)
        y.register_hook(third)
        (y * lib.tensor([1.0, 10.0], device=dev)).sum().backward()
        return seen, to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_hook_result_replaces_grad_downstream(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        y = x * x
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        (y * 2).sum().backward()
        return to_numpy(x.grad), to_numpy(y.grad)

    got, expected = run_both(torch, snippet, device)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b)


def test_leaf_hook_runs_before_accumulation(torch, device):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)

        def hook(g):
            seen.append(to_numpy(g).tolist())
            return g * 100

        x.register_hook(hook)
        (x * 2).sum().backward()
        first = to_numpy(x.grad).tolist()
        (x * 3).sum().backward()
        return seen, first, to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_leaf_hook_registered_after_graph_is_built(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * 3).sum()
        x.register_hook(lambda g: seen.append(g.tolist()) or g * 2)
        y.backward()
        return seen, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_hook_handle_remove(torch):
    def snippet(lib, dev):
        calls = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        handle = x.register_hook(lambda g: calls.append(1))
        (x * 2).sum().backward()
        handle.remove()
        handle.remove()
        (x * 2).sum().backward()
        y = x * 2
        h2 = y.register_hook(lambda g: g * 0)
        h2.remove()
        y.sum().backward()
        return len(calls), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_hook_removes_itself_while_running(torch):
    def snippet(lib, dev):
        calls = []
        handles = {}
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2

        def once(g):
            calls.append(to_numpy(g).tolist())
            handles["h"].remove()
            return g * 5

        handles["h"] = y.register_hook(once)
        z = y.sum()
        z.backward(retain_graph=True)
        z.backward()
        return calls, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_non_leaf_hook_stays_with_grad_fn_of_registration_time(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2

        def hook(g):
            seen.append(to_numpy(g).tolist())
            return g * 10

        y.register_hook(hook)
        y.mul_(3)
        (y * lib.tensor([1.0, 7.0])).sum().backward()
        return seen, x.grad.tolist(), node_name(y.grad_fn)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_hook_registered_after_in_place_goes_to_the_new_node(torch):
    def snippet(lib, dev):
        seen = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: seen.append(("before", g.tolist())))
        y.add_(1)
        y.register_hook(lambda g: seen.append(("after", g.tolist())) or g * 10)
        (y * lib.tensor([1.0, 3.0])).sum().backward()
        return seen, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("retain_first", [True, False])
def test_retain_grad_sees_grad_after_hooks_regardless_of_order(torch, retain_first):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        if retain_first:
            y.retain_grad()
            y.register_hook(lambda g: g * 3)
        else:
            y.register_hook(lambda g: g * 3)
            y.retain_grad()
        y.sum().backward()
        return y.grad.tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_hook_changing_the_shape_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: g.sum())
        y.sum().backward()

    assert_same_error(torch, snippet, "hook", "has changed the size of value")


def test_hook_changing_the_dtype_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: g.double())
        y.sum().backward()

    assert_same_error(torch, snippet, "hook", "has changed the type of value")


def test_register_hook_without_requires_grad_raises(torch):
    def snippet(lib, dev):
        lib.ones(2).register_hook(lambda g: g)

    assert_same_error(torch, snippet, "hook", "require")


# ------------------------------------------------------------------------------------------- detach, data, clone


def test_detach_shares_storage_and_version_counter(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        y = x * 1
        d = y.detach()
        d[0] = 10.0
        d.add_(1)
        return (to_numpy(y).tolist(), y._version, d._version, d.requires_grad, d.is_leaf, d.grad_fn is None)

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_detach_of_leaf_shares_storage(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        d = x.detach()
        d.mul_(4)
        return x.detach().tolist(), x._version, d._version

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_data_shares_storage_but_not_version_counter(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        d = x.data
        d.add_(5)
        d[1] = 0.0
        return (to_numpy(x).tolist(), x._version, d._version, d.requires_grad, x.requires_grad, x.is_leaf)

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_data_of_saved_tensor_modified_does_not_raise_at_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        y = (x * w).sum()
        w.data.mul_(2)
        y.backward()
        return x.grad.tolist(), w.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_clone_copies_and_stays_in_graph(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        c = x.clone()
        name = node_name(c.grad_fn)
        with lib.no_grad():
            c2 = x.clone()
        c2[0] = 100.0
        (c * c).sum().backward()
        return name, c.is_leaf, c2.requires_grad, to_numpy(x).tolist(), to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_in_place_through_detach_invalidates_saved_tensor(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        e = x.exp()
        e.detach().zero_()
        e.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


def test_assigning_data_replaces_values_and_keeps_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.data = lib.tensor([5.0, 6.0])
        (x * x).sum().backward()
        return x.detach().tolist(), x.requires_grad, x.is_leaf, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_detach_in_place(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        returned = y.detach_()
        return returned is y, y.requires_grad, y.is_leaf, y.grad_fn is None, y.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


# -------------------------------------------------------------------------------------------------- in-place ops

INPLACE_CASES = {
    "add_": lambda lib, t: t.add_(1),
    "add_tensor": lambda lib, t: t.add_(lib.tensor([1.0, 2.0, 3.0])),
    "mul_": lambda lib, t: t.mul_(2),
    "sub_": lambda lib, t: t.sub_(0.5),
    "div_": lambda lib, t: t.div_(4),
    "fill_": lambda lib, t: t.fill_(7),
    "zero_": lambda lib, t: t.zero_(),
    "clamp_": lambda lib, t: t.clamp_(0.0, 2.0),
    "iadd": lambda lib, t: t.__iadd__(1),
    "imul": lambda lib, t: t.__imul__(3),
    "setitem": lambda lib, t: t.__setitem__(0, 5.0),
    "setitem_slice": lambda lib, t: t.__setitem__(slice(None), 2.0),
}


@pytest.mark.parametrize("case", list(INPLACE_CASES))
def test_in_place_op_bumps_version(torch, case):
    def snippet(lib, dev):
        t = lib.tensor([1.0, -2.0, 3.0])
        versions = [t._version]
        result = INPLACE_CASES[case](lib, t)
        versions.append(t._version)
        INPLACE_CASES[case](lib, t)
        versions.append(t._version)
        return versions, t.tolist(), result is t or result is None

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_views_share_the_version_counter_with_their_base(torch):
    def snippet(lib, dev):
        base = lib.tensor([1.0, 2.0, 3.0, 4.0])
        view = base[1:3]
        row = base.view(2, 2)[0]
        view.add_(10)
        row.mul_(2)
        base[3] = 0.0
        return base.tolist(), base._version, view._version, row._version

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_augmented_assignment_keeps_the_same_tensor(torch):
    def snippet(lib, dev):
        t = lib.tensor([1.0, 2.0])
        before = t
        t += 1
        t *= 3
        t -= 1
        t /= 2
        return t is before, t._version, t.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize("case", ["add_", "mul_", "sub_", "div_", "fill_", "zero_", "clamp_", "iadd", "setitem"])
def test_in_place_on_leaf_requiring_grad_raises(torch, case):
    def snippet(lib, dev):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        INPLACE_CASES[case](lib, x)

    assert_same_error(torch, snippet, "leaf Variable that requires grad", "in-place operation")


def test_in_place_on_leaf_under_no_grad_is_allowed(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, -2.0, 3.0], device=dev, requires_grad=True)
        with lib.no_grad():
            x.mul_(2)
            x[0] = 0.5
            x -= 1
        (x * x).sum().backward()
        flags = (x.is_leaf, x.requires_grad, x.grad_fn is None, x._version)
        return flags, to_numpy(x).tolist(), to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_modifying_a_saved_tensor_in_place_raises_at_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        a = x + 0
        b = a * a
        a.add_(1)
        b.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


def test_modifying_a_saved_output_in_place_raises_at_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        e = x.exp()
        e.mul_(2)
        e.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


def test_in_place_not_needed_by_backward_works(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        y = x + 1
        y.add_(1)
        z = x * 2
        w = z + 1
        z.mul_(3)
        (y * lib.tensor([1.0, 2.0, 3.0], device=dev) + w + z).sum().backward()
        return to_numpy(y).tolist(), to_numpy(x.grad).tolist(), y._version, node_name(y.grad_fn)

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_in_place_on_view_of_leaf_under_no_grad(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with lib.no_grad():
            x[1:].mul_(2)
            x[0].fill_(-1.0)
        (x * x).sum().backward()
        return x.detach().tolist(), x._version, x.is_leaf, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_in_place_on_base_invalidates_saved_view(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        v = y[0:2]
        z = v * v
        y.add_(1)
        z.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


@pytest.mark.parametrize(
    "op",
    [
        lambda lib, y: y[0].mul_(3),
        lambda lib, y: y[1:].add_(lib.tensor([1.0, 2.0])),
        lambda lib, y: y[:2].zero_(),
    ],
    ids=["select_mul_", "slice_add_", "slice_zero_"],
)
def test_in_place_on_view_of_non_leaf_is_recorded(torch, op):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        op(lib, y)
        (y * y).sum().backward()
        return y.detach().tolist(), y._version, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_slice_assignment_is_in_place(torch):
    def snippet(lib, dev):
        a = lib.zeros(3)
        same = a
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        a[:] = x * 2
        (a * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        return same is a, a._version, a.requires_grad, a.is_leaf, a.detach().tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize(
    "key", [slice(None), slice(0, 2), 0, (Ellipsis,)], ids=["full_slice", "part_slice", "int", "ellipsis"]
)
def test_setitem_grad_fn_name(torch, key):
    def snippet(lib, dev):
        a = lib.zeros(3)
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        a[key] = (x * 2)[key]
        return node_name(a.grad_fn)

    got, expected = run_both(torch, snippet)
    assert got == expected


@pytest.mark.parametrize(
    "op",
    [
        lambda lib, y, dev: y.add_(1),
        lambda lib, y, dev: y.mul_(lib.tensor([2.0, 3.0], device=dev)),
        lambda lib, y, dev: y.sub_(lib.tensor([1.0, 1.0], device=dev), alpha=2),
        lambda lib, y, dev: y.div_(2),
        lambda lib, y, dev: y.exp_(),
        lambda lib, y, dev: y.clamp_(min=2.5),
        lambda lib, y, dev: y.__setitem__(1, 0.0),
    ],
    ids=["add_", "mul_", "sub_alpha", "div_", "exp_", "clamp_", "setitem"],
)
def test_in_place_on_non_leaf_rebinds_grad_fn_and_grads_match(torch, device, op):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        y = x * 2
        op(lib, y, dev)
        name = node_name(y.grad_fn)
        (y * y).sum().backward()
        return name, y._version, to_numpy(y), to_numpy(x.grad)

    got, expected = run_both(torch, snippet, device)
    assert got[:2] == expected[:2]
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-6)
    np.testing.assert_allclose(got[3], expected[3], rtol=1e-6)


def test_retain_grad_then_in_place_then_backward(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        (y * lib.tensor([5.0, 7.0])).sum().backward()
        return y.grad.tolist(), y.retains_grad, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_setitem_of_grad_tensor_into_plain_tensor_enters_the_graph(torch, device):
    def snippet(lib, dev):
        w = lib.tensor([1.5, -2.0], device=dev, requires_grad=True)
        x = lib.zeros(3, device=dev)
        x[0] = w[0] * 2
        x[1:] = w * w
        flags = (x.requires_grad, x.is_leaf, node_name(x.grad_fn), x._version)
        (x * lib.tensor([1.0, 2.0, 3.0], device=dev)).sum().backward()
        return flags, to_numpy(x).tolist(), to_numpy(w.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


# ------------------------------------------------------------------------------------------------ backward errors


def test_backward_on_non_scalar_without_gradient_raises(torch):
    def snippet(lib, dev):
        x = lib.ones(3, requires_grad=True)
        (x * 2).backward()

    assert_same_error(torch, snippet, "grad can be implicitly created only for scalar outputs")


def test_backward_on_tensor_without_grad_raises(torch):
    def snippet(lib, dev):
        lib.ones(3).sum().backward()

    assert_same_error(torch, snippet, "does not require grad", "grad_fn")


def test_second_backward_through_freed_graph_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
        y.backward()
        y.backward()

    assert_same_error(torch, snippet, "Trying to backward through the graph a second time", "retain_graph=True")


def test_second_backward_with_retain_graph_accumulates(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        y = (x * x).exp().sum()
        y.backward(retain_graph=True)
        y.backward()
        return to_numpy(x.grad)

    got, expected = run_both(torch, snippet, device)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_graph_without_saved_tensors_can_be_backwarded_twice(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x + x).sum()
        y.backward()
        y.backward()
        return x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_numpy_on_tensor_requiring_grad_raises(torch):
    def snippet(lib, dev):
        lib.ones(2, requires_grad=True).numpy()

    assert_same_error(torch, snippet, "requires grad", "detach().numpy()")


def test_numpy_after_detach_works(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        return x.detach().numpy().tolist(), (x * 2).detach().numpy().dtype.name

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_requires_grad_cannot_be_cleared_on_non_leaf(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.requires_grad = False

    assert_same_error(torch, snippet, "requires_grad", "leaf variables", "detach()")


def test_requires_grad_true_on_non_leaf_via_method_is_allowed(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        returned = y.requires_grad_(True)
        return returned is y, y.requires_grad, y.is_leaf

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_requires_grad_attribute_cannot_be_assigned_on_non_leaf(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.requires_grad = True

    assert_same_error(torch, snippet, "requires_grad", "leaf variables")


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor([1, 2, 3], requires_grad=True),
        lambda lib: lib.tensor([1, 2, 3]).requires_grad_(),
        lambda lib: lib.arange(3).requires_grad_(True),
        lambda lib: lib.ones(2, dtype=lib.int32, requires_grad=True),
    ],
    ids=["tensor_kwarg", "requires_grad_", "arange", "ones_int32"],
)
def test_integer_tensor_cannot_require_grad(torch, make):
    def snippet(lib, dev):
        make(lib)

    assert_same_error(torch, snippet, "floating point", "require gradients")


def test_integer_tensor_requires_grad_attribute_cannot_be_set(torch):
    def snippet(lib, dev):
        t = lib.tensor([1, 2])
        t.requires_grad = True

    assert_same_error(torch, snippet, "floating point", "require gradients")


def test_backward_gradient_of_wrong_shape_raises(torch):
    def snippet(lib, dev):
        x = lib.ones(3, requires_grad=True)
        (x * 2).backward(lib.ones(4))

    assert_same_error(torch, snippet, "shape")


def test_backward_on_a_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor(2.0, requires_grad=True)
        x.backward()
        v = lib.tensor([1.0, 2.0], requires_grad=True)
        v.backward(lib.tensor([3.0, 4.0]))
        return x.grad.tolist(), v.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_backward_with_explicit_gradient(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        (x * x).backward(lib.tensor([1.0, 0.5, -1.0], device=dev))
        return to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


# ------------------------------------------------------------------------------------------------------- dtypes


def test_float32_mlp_keeps_float32(torch, device):
    def snippet(lib, dev):
        rng = np.random.default_rng(0)
        x = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=dev)
        w1 = lib.tensor(rng.standard_normal((3, 5)).astype(np.float32), device=dev, requires_grad=True)
        b1 = lib.tensor(rng.standard_normal(5).astype(np.float32), device=dev, requires_grad=True)
        w2 = lib.tensor(rng.standard_normal((5, 2)).astype(np.float32), device=dev, requires_grad=True)
        h = lib.relu(x @ w1 + b1)
        logits = h.matmul(w2)
        probs = lib.softmax(logits, dim=-1)
        logp = lib.log_softmax(logits, dim=1)
        loss = -(logp[:, 0]).mean() + (probs * probs).mean() * 0.5
        loss.backward()
        tensors = (h, logits, probs, logp, loss, w1.grad, b1.grad, w2.grad)
        return [dtype_name(t) for t in tensors], [to_numpy(t) for t in tensors]

    (names, values), (enames, evalues) = run_both(torch, snippet, device)
    assert names == enames
    assert all(n == "float32" for n in names)
    for a, b in zip(values, evalues):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


SCALAR_CASES = {
    "mul_float": lambda x: x * 2.5,
    "rmul_float": lambda x: 2.5 * x,
    "add_int": lambda x: x + 1,
    "radd_int": lambda x: 1 + x,
    "sub_float": lambda x: x - 0.5,
    "rsub_int": lambda x: 1 - x,
    "div_int": lambda x: x / 2,
    "rdiv_float": lambda x: 1.0 / x,
    "pow_int": lambda x: x**2,
    "pow_float": lambda x: x**0.5,
    "rpow_int": lambda x: 2**x,
    "rpow_float": lambda x: 1.5**x,
    "mul_bool": lambda x: x * True,
}


@pytest.mark.parametrize("case", list(SCALAR_CASES))
def test_python_scalars_do_not_promote_float32(torch, case):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
        y = SCALAR_CASES[case](x)
        y.sum().backward()
        return dtype_name(y), dtype_name(x.grad), to_numpy(y), to_numpy(x.grad)

    (name, gname, y, g), (ename, egname, ey, eg) = run_both(torch, snippet)
    assert (name, gname) == (ename, egname) == ("float32", "float32")
    np.testing.assert_allclose(y, ey, rtol=1e-6)
    np.testing.assert_allclose(g, eg, rtol=1e-6)


@pytest.mark.parametrize(
    "expr",
    [
        lambda lib, i: i * 2.5,
        lambda lib, i: i + 1,
        lambda lib, i: i / 2,
        lambda lib, i: i * lib.tensor(2.0),
        lambda lib, i: lib.tensor([1.0, 2.0]) * lib.tensor(2.0, dtype=lib.float64),
        lambda lib, i: lib.tensor([1.0, 2.0]) + lib.tensor([1.0, 2.0], dtype=lib.float64),
        lambda lib, i: i + True,
    ],
    ids=[
        "int_times_float",
        "int_plus_int",
        "int_div",
        "int_times_0d_float",
        "f32_times_0d_f64",
        "f32_plus_f64",
        "int_plus_bool",
    ],
)
def test_dtype_promotion_matches_torch(torch, expr):
    def snippet(lib, dev):
        i = lib.tensor([1, 2])
        return dtype_name(expr(lib, i))

    got, expected = run_both(torch, snippet)
    assert got == expected
