"""Custom autograd Functions, gradcheck, ``autograd.grad`` and ``backward(inputs=...)``, compared with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, run_both, to_numpy

# ------------------------------------------------------------------------------------------------------ helpers


def as_numpy(v) -> np.ndarray:
    return to_numpy(v) if hasattr(v, "detach") else np.asarray(v)


def assert_all_close(got, expected, rtol=1e-6, atol=1e-7):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        if a is None or b is None:
            assert a is None and b is None, f"{a!r} vs {b!r}"
        else:
            np.testing.assert_allclose(as_numpy(a), as_numpy(b), rtol=rtol, atol=atol)


def grads_of(*tensors):
    return [None if t.grad is None else to_numpy(t.grad).copy() for t in tensors]


# ----------------------------------------------------------------------------------------------- user Functions


def _mul_function(lib, record: dict):
    class MyMul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            record["forward_grad_mode"] = lib.is_grad_enabled()
            record["forward_needs"] = tuple(ctx.needs_input_grad)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            record["backward_needs"] = tuple(ctx.needs_input_grad)
            record["saved_types"] = (type(a).__name__, type(b).__name__)
            return grad * b, grad * a

    return MyMul


def test_function_forward_backward_and_saved_tensors(torch, device):
    def snippet(lib, dev):
        record = {}
        my_mul = _mul_function(lib, record)
        a = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        b = lib.tensor([4.0, -5.0, 6.0], device=dev, requires_grad=True)
        out = my_mul.apply(a, b)
        flags = (out.requires_grad, out.is_leaf, type(out.grad_fn).__name__, out.grad_fn.name())
        (out * lib.tensor([1.0, 2.0, 3.0], device=dev)).sum().backward()
        return record, flags, to_numpy(out), grads_of(a, b)

    (rec, flags, out, grads), (erec, eflags, eout, egrads) = run_both(torch, snippet, device)
    assert rec == erec
    assert flags == eflags
    assert flags[2] == "MyMulBackward"
    np.testing.assert_allclose(out, eout)
    assert_all_close(grads, egrads)


def test_function_needs_input_grad(torch):
    def snippet(lib, dev):
        record = {}
        my_mul = _mul_function(lib, record)
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        my_mul.apply(a, b).sum().backward()
        return record, a.grad.tolist(), b.grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_saved_inputs_keep_requires_grad_in_backward(torch):
    def snippet(lib, dev):
        seen = []

        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                seen.append((a.requires_grad, b.requires_grad))
                return grad * b, grad * a

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        Mul.apply(a, b).sum().backward()
        return seen

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_without_grad_inputs_returns_plain_tensor(torch):
    def snippet(lib, dev):
        record = {}
        my_mul = _mul_function(lib, record)
        out = my_mul.apply(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0]))
        x = lib.tensor([1.0], requires_grad=True)
        with lib.no_grad():
            out2 = my_mul.apply(x, x)
        return out.requires_grad, out.grad_fn is None, out2.requires_grad, out2.grad_fn is None, record

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_mark_non_differentiable(torch):
    def snippet(lib, dev):
        class MaxWithIndex(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = x.argmax(0)
                values = x.amax(0)
                mask = x == values
                ctx.save_for_backward(mask.to(x.dtype))
                ctx.mark_non_differentiable(idx)
                return values, idx

            @staticmethod
            def backward(ctx, g_values, g_idx):
                (mask,) = ctx.saved_tensors
                return g_values * mask

        x = lib.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
        values, idx = MaxWithIndex.apply(x)
        flags = (values.requires_grad, idx.requires_grad, idx.grad_fn is None, str(idx.dtype).split(".")[-1])
        (values * lib.tensor([10.0, 100.0])).sum().backward()
        return flags, idx.tolist(), values.tolist(), x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_multiple_outputs_unused_grads_are_zeros(torch, device):
    def snippet(lib, dev):
        seen = []

        class SplitScale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3, x * 4

            @staticmethod
            def backward(ctx, ga, gb, gc):
                seen.append([None if g is None else to_numpy(g).tolist() for g in (ga, gb, gc)])
                return ga * 2 + gb * 3 + gc * 4

        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        a, b, c = SplitScale.apply(x)
        names = {type(t.grad_fn).__name__ for t in (a, b, c)}
        same_node = a.grad_fn is b.grad_fn is c.grad_fn
        (b * lib.tensor([5.0, 7.0], device=dev)).sum().backward()
        return seen, names, same_node, to_numpy(x.grad).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_function_multiple_outputs_all_used(torch):
    def snippet(lib, dev):
        class SumAndProduct(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                return x + y, x * y

            @staticmethod
            def backward(ctx, g_sum, g_prod):
                x, y = ctx.saved_tensors
                return g_sum + g_prod * y, g_sum + g_prod * x

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, -1.0], requires_grad=True)
        s, p = SumAndProduct.apply(x, y)
        (s * p).sum().backward()
        return x.grad.tolist(), y.grad.tolist(), (s.grad_fn is p.grad_fn)

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_set_materialize_grads_false_gives_none(torch):
    def snippet(lib, dev):
        seen = []

        class Pair(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, ga, gb):
                seen.append((ga is None, gb is None))
                total = 0
                if ga is not None:
                    total = total + ga * 2
                if gb is not None:
                    total = total + gb * 3
                return total

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Pair.apply(x)
        a.sum().backward()
        return seen, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_with_non_tensor_arguments(torch):
    def snippet(lib, dev):
        class ScaleShift(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale, name, shift):
                ctx.scale = scale
                ctx.name = name
                return x * scale + shift

            @staticmethod
            def backward(ctx, g):
                return g * ctx.scale, None, None, None

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = ScaleShift.apply(x, 3.0, "label", 1)
        out.sum().backward()
        return out.tolist(), x.grad.tolist(), out.grad_fn.needs_input_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_next_functions_list_only_tensor_arguments(torch):
    def snippet(lib, dev):
        class Affine(lib.autograd.Function):
            @staticmethod
            def forward(ctx, scale, x, shift, bias):
                ctx.scale = scale
                return x * scale + shift + bias

            @staticmethod
            def backward(ctx, g):
                return None, g * ctx.scale, None, g

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        bias = lib.tensor([0.5, 0.5])
        out = Affine.apply(2.0, x, 1, bias)
        out.sum().backward()
        nexts = [(None if fn is None else type(fn).__name__, nr) for fn, nr in out.grad_fn.next_functions]
        return nexts, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_with_non_tensor_arguments_name_is_not_shadowed_by_ctx_attributes(torch):
    def snippet(lib, dev):
        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, tag):
                ctx.tag = tag
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g, None

        x = lib.tensor([1.0], requires_grad=True)
        out = Identity.apply(x, "t")
        return type(out.grad_fn).__name__, out.grad_fn.name(), out.grad_fn.tag

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_node_next_functions(torch):
    def snippet(lib, dev):
        record = {}
        my_mul = _mul_function(lib, record)
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        out = my_mul.apply(a * 2, b)
        return [(None if fn is None else type(fn).__name__, nr) for fn, nr in out.grad_fn.next_functions]

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_returning_its_input_unchanged(torch):
    def snippet(lib, dev):
        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = Identity.apply(x)
        flags = (out is x, x.is_leaf, x.grad_fn is None, out.is_leaf, type(out.grad_fn).__name__)
        out.sum().backward()
        return flags, x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def _wrong_count_function(lib, returned: str):
    class Wrong(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            if returned == "fewer":
                return g
            if returned == "extra_none":
                return g, g, None
            return g, g, g

    return Wrong


@pytest.mark.parametrize("returned", ["fewer", "more"])
def test_function_returning_wrong_number_of_grads_raises(torch, returned):
    def snippet(lib, dev):
        wrong = _wrong_count_function(lib, returned)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0], requires_grad=True)
        wrong.apply(x, y).sum().backward()

    assert_same_error(torch, snippet, "incorrect number of gradients", "WrongBackward")


def test_function_returning_extra_none_grads_is_allowed(torch):
    def snippet(lib, dev):
        wrong = _wrong_count_function(lib, "extra_none")
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.tensor([3.0, 4.0], requires_grad=True)
        wrong.apply(x, y).sum().backward()
        return x.grad.tolist(), y.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_function_returning_grad_of_wrong_shape_raises(torch):
    def snippet(lib, dev):
        class BadShape(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return lib.ones(5)

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        BadShape.apply(x).sum().backward()

    assert_same_error(torch, snippet, "BadShapeBackward", "invalid gradient", "shape")


def test_function_saved_tensor_modified_in_place_raises(torch):
    def snippet(lib, dev):
        record = {}
        my_mul = _mul_function(lib, record)
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a = x * 1
        b = lib.tensor([3.0, 4.0])
        out = my_mul.apply(a, b)
        b.add_(1)
        out.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


def test_function_saved_output_modified_in_place_raises(torch):
    def snippet(lib, dev):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                (out,) = ctx.saved_tensors
                return g * out

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = Exp.apply(x)
        out.mul_(2)
        out.sum().backward()

    assert_same_error(torch, snippet, "modified by an inplace operation", "version")


def test_function_saved_output_is_usable(torch, device):
    def snippet(lib, dev):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                (out,) = ctx.saved_tensors
                return g * out

        x = lib.tensor([0.5, -1.0], device=dev, requires_grad=True)
        out = Exp.apply(x)
        (out * out).sum().backward()
        return to_numpy(x.grad)

    got, expected = run_both(torch, snippet, device)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_function_double_backward_through_custom_backward(torch):
    def snippet(lib, dev):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x**3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x**2

        x = lib.tensor([1.0, -2.0], requires_grad=True)
        (g,) = lib.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), x)
        return g.tolist(), h.tolist(), g.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


# ------------------------------------------------------------------------------------------------------ gradcheck


def _cube_function(lib, wrong: bool):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x**3 * y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * 3 * x**2 * y
            if wrong:
                gx = gx * 1.1
            return gx, g * x**3

    return Cube


def test_gradcheck_passes_on_correct_function(torch):
    def snippet(lib, dev):
        cube = _cube_function(lib, wrong=False)
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([1.5, 0.5, -0.25], dtype=lib.float64, requires_grad=True)
        return lib.autograd.gradcheck(cube.apply, (x, y), eps=1e-6, atol=1e-5)

    got, expected = run_both(torch, snippet)
    assert got is expected is True


def test_gradcheck_raises_on_wrong_backward(torch):
    def snippet(lib, dev):
        cube = _cube_function(lib, wrong=True)
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([1.5, 0.5, -0.25], dtype=lib.float64, requires_grad=True)
        lib.autograd.gradcheck(cube.apply, (x, y), eps=1e-6, atol=1e-5)

    got, expected = assert_same_error(torch, snippet, "Jacobian mismatch", "output 0", "input 0")
    assert isinstance(got, RuntimeError)


def test_gradcheck_without_raise_returns_false_on_wrong_backward(torch):
    def snippet(lib, dev):
        cube = _cube_function(lib, wrong=True)
        x = lib.tensor([0.3, -1.2], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([1.5, 0.5], dtype=lib.float64, requires_grad=True)
        return lib.autograd.gradcheck(cube.apply, (x, y), eps=1e-6, atol=1e-5, raise_exception=False)

    got, expected = run_both(torch, snippet)
    assert got is expected is False


def test_gradgradcheck_on_built_in_ops(torch):
    def snippet(lib, dev):
        x = lib.tensor([0.3, -1.2, 0.7], dtype=lib.float64, requires_grad=True)
        return lib.autograd.gradgradcheck(lambda t: (t.tanh() * t**2).sum(), (x,))

    got, expected = run_both(torch, snippet)
    assert got is expected is True


# -------------------------------------------------------------------------------------------------- autograd.grad


def test_grad_basic(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
        y = (x * x.exp()).sum()
        result = lib.autograd.grad(y, x)
        return type(result).__name__, len(result), to_numpy(result[0]), result[0].requires_grad, x.grad is None

    (kind, n, g, req, no_grad), (ekind, en, eg, ereq, eno_grad) = run_both(torch, snippet, device)
    assert (kind, n, req, no_grad) == (ekind, en, ereq, eno_grad) == ("tuple", 1, False, True)
    np.testing.assert_allclose(g, eg, rtol=1e-6)


def test_grad_of_a_tensor_with_respect_to_itself(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        (gx,) = lib.autograd.grad(x, x, grad_outputs=lib.tensor([4.0, 5.0]))
        (gy,) = lib.autograd.grad(y, y, grad_outputs=lib.tensor([6.0, 7.0]))
        return gx.tolist(), gy.tolist(), x.grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_applies_hooks_of_the_inputs(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g: g * 10)
        y = x * 3
        y.register_hook(lambda g: g + 1)
        (gx,) = lib.autograd.grad((y * y).sum(), x)
        (gy,) = lib.autograd.grad((y * y).sum(), y)
        return gx.tolist(), gy.tolist(), x.grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_populates_retained_grads(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mid = x * 3
        mid.retain_grad()
        (g,) = lib.autograd.grad((mid * mid).sum(), x)
        return g.tolist(), mid.grad.tolist(), x.grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_with_grad_outputs(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev, requires_grad=True)
        y = x * x
        v = lib.tensor([[1.0, -1.0], [0.5, 2.0]], device=dev)
        (g,) = lib.autograd.grad(y, x, grad_outputs=v)
        (g2,) = lib.autograd.grad(x * 3, [x], [v])
        return to_numpy(g).tolist(), to_numpy(g2).tolist()

    got, expected = run_both(torch, snippet, device)
    assert got == expected


def test_grad_non_scalar_without_grad_outputs_raises(torch):
    def snippet(lib, dev):
        x = lib.ones(2, requires_grad=True)
        lib.autograd.grad(x * 2, x)

    assert_same_error(torch, snippet, "grad can be implicitly created only for scalar outputs")


def test_grad_allow_unused(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        unused = lib.tensor([3.0], requires_grad=True)
        gx, gu = lib.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
        return gx.tolist(), gu

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[1] is None


def test_grad_unused_input_without_allow_unused_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        unused = lib.tensor([3.0], requires_grad=True)
        lib.autograd.grad((x * 2).sum(), [x, unused])

    assert_same_error(torch, snippet, "appears to not have been used in the graph", "allow_unused=True")


def test_grad_materialize_grads(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        unused = lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
        gx, gu = lib.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
        return gx.tolist(), gu.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_multiple_inputs_and_outputs(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        w = lib.tensor([0.5, -1.5], device=dev, requires_grad=True)
        y1 = (x * w).sum()
        y2 = x.exp() * w
        grads = lib.autograd.grad(
            [y1, y2], [x, w], grad_outputs=[lib.tensor(2.0, device=dev), lib.tensor([1.0, 3.0], device=dev)]
        )
        return [to_numpy(g) for g in grads]

    got, expected = run_both(torch, snippet, device)
    assert_all_close(got, expected, rtol=1e-6)


def test_grad_does_not_touch_grad_of_leaves(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        w.grad = lib.tensor([100.0, 200.0])
        mid = x * w
        mid.retain_grad()
        (gx,) = lib.autograd.grad((mid * mid).sum(), x)
        return gx.tolist(), x.grad, w.grad.tolist(), mid.retains_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_grad_with_respect_to_non_leaf(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        mid = x * 3
        out = (mid.exp() * mid).sum()
        gm, gx = lib.autograd.grad(out, [mid, x])
        return to_numpy(gm), to_numpy(gx), x.grad is None

    got, expected = run_both(torch, snippet, device)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)
    assert got[2] == expected[2]


def test_grad_of_non_leaf_only_part_of_graph(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a = x * 2
        b = a.exp()
        c = (b + a).sum()
        (ga,) = lib.autograd.grad(c, a, retain_graph=True)
        (gb,) = lib.autograd.grad(c, b)
        return ga.tolist(), gb.tolist(), x.grad

    got, expected = run_both(torch, snippet)
    assert_all_close(got[:2], expected[:2])
    assert got[2] is expected[2] is None


def test_grad_retain_graph(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).sum()
        (g1,) = lib.autograd.grad(y, x, retain_graph=True)
        (g2,) = lib.autograd.grad(y, x)
        return to_numpy(g1), to_numpy(g2)

    got, expected = run_both(torch, snippet)
    assert_all_close(got, expected)


def test_grad_twice_without_retain_graph_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x.exp() * x).sum()
        lib.autograd.grad(y, x)
        lib.autograd.grad(y, x)

    assert_same_error(torch, snippet, "Trying to backward through the graph a second time")


def test_grad_of_output_not_requiring_grad_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        lib.autograd.grad(lib.ones(2).sum(), x)

    assert_same_error(torch, snippet, "does not require grad")


def test_grad_with_respect_to_input_not_requiring_grad_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([1.0, 2.0])
        lib.autograd.grad((x * c).sum(), c)

    assert_same_error(torch, snippet, "does not require grad")


def test_grad_create_graph_double_backward(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([0.5, -1.0, 2.0], device=dev, requires_grad=True)
        y = (x.tanh() * x**2).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        flags = (g.requires_grad, g.grad_fn is not None)
        (h,) = lib.autograd.grad(g.sum(), x, create_graph=True)
        (h * h).sum().backward()
        return flags, [to_numpy(t) for t in (g, h, x.grad)]

    (flags, values), (eflags, evalues) = run_both(torch, snippet, device)
    assert flags == eflags
    assert_all_close(values, evalues, rtol=1e-5, atol=1e-6)


def test_grad_create_graph_mixed_partials(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.5], requires_grad=True)
        y = lib.tensor([-0.5], requires_grad=True)
        f = (x**2 * y**3 + x * y).sum()
        gx, gy = lib.autograd.grad(f, [x, y], create_graph=True)
        (gxy,) = lib.autograd.grad(gx.sum(), y, retain_graph=True)
        (gyx,) = lib.autograd.grad(gy.sum(), x)
        return gx.tolist(), gy.tolist(), gxy.tolist(), gyx.tolist()

    got, expected = run_both(torch, snippet)
    assert_all_close([np.array(v) for v in got], [np.array(v) for v in expected])


# --------------------------------------------------------------------------------------------- backward(inputs=)


def test_backward_inputs_accumulates_only_into_those(torch, device):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], device=dev, requires_grad=True)
        w = lib.tensor([3.0, -1.0], device=dev, requires_grad=True)
        b = lib.tensor([0.5, 0.5], device=dev, requires_grad=True)
        y = ((x * w).exp() + b).sum()
        y.backward(inputs=[w], retain_graph=True)
        first = grads_of(x, w, b)
        y.backward(inputs=[w, b])
        return first, grads_of(x, w, b)

    (first, second), (efirst, esecond) = run_both(torch, snippet, device)
    assert_all_close(first, efirst, rtol=1e-6)
    assert_all_close(second, esecond, rtol=1e-6)


def test_backward_inputs_single_tensor_and_non_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        mid = x * 3
        y = (mid * mid).sum()
        y.backward(inputs=mid)
        return mid.grad.tolist(), x.grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_autograd_backward_function(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y1 = x * 2
        y2 = (x * x).sum()
        lib.autograd.backward([y1, y2], [lib.tensor([1.0, -1.0]), None])
        return x.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_backward_empty_inputs_raises(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        (x * 2).sum().backward(inputs=[])

    assert_same_error(torch, snippet, "inputs", "cannot be empty")


def _mul_in_place(lib, return_input=True):
    class MulInPlace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x if return_input else x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    return MulInPlace


def test_mark_dirty_rewrites_the_inputs_history_as_torch(torch):
    import trainkit

    seen = []
    for lib in (trainkit, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a.clone()
        c = _mul_in_place(lib).apply(b)
        same, name, version = c is b, type(b.grad_fn).__name__, b._version
        (c * lib.tensor([1.0, 3.0])).sum().backward()
        plain = lib.tensor([1.0, 2.0])
        out = _mul_in_place(lib).apply(plain)
        seen.append((same, name, version, a.grad.tolist(), b.tolist(), out is plain, plain._version, out.grad_fn))
    assert seen[0] == seen[1]


def test_mark_dirty_errors_match_torch(torch):
    assert_same_error(
        torch,
        lambda lib, dev: _mul_in_place(lib).apply(lib.ones(2, requires_grad=True)),
        "leaf Variable that requires grad",
    )
    assert_same_error(
        torch,
        lambda lib, dev: _mul_in_place(lib, False).apply(lib.ones(2, requires_grad=True) * 1),
        "marked as dirty during the forward method were not returned",
    )
