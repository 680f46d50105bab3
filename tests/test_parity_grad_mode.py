"""Grad mode against PyTorch: the guards as decorators of plain and generator functions, their nesting, and the
Python protocol of a tensor that depends on it (iteration records UnbindBackward0, scalar conversions)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error

import trainkit


def _both(torch, fn):
    return fn(trainkit), fn(torch)


# name -> (the guard, made from the library; the grad mode outside it)
GUARDS = {
    "no_grad()": (lambda lib: lib.no_grad(), True),
    "no_grad": (lambda lib: lib.no_grad, True),
    "enable_grad()": (lambda lib: lib.enable_grad(), False),
    "inference_mode()": (lambda lib: lib.inference_mode(), True),
    "set_grad_enabled(False)": (lambda lib: lib.set_grad_enabled(False), True),
    "set_grad_enabled(True)": (lambda lib: lib.set_grad_enabled(True), False),
}


@pytest.mark.parametrize("name", list(GUARDS))
def test_decorated_generator_runs_each_resumption_under_the_guard(torch, name):
    def run(lib):
        make, outside = GUARDS[name]
        lib.set_grad_enabled(outside)
        try:
            guard = make(lib)

            def gen():
                for _ in range(3):
                    received = yield lib.is_grad_enabled()
                    assert received is None or received == 7

            decorated = guard(gen)
            seen = [(inside, lib.is_grad_enabled()) for inside in decorated()]
            g = decorated()
            first = next(g)
            second = g.send(7)
            g.close()
            return seen, first, second, lib.is_grad_enabled()
        finally:
            lib.set_grad_enabled(True)

    assert run(trainkit) == run(torch)


def test_generator_inner_guard_and_return_value(torch):
    def run(lib):
        @lib.no_grad()
        def gen():
            yield lib.is_grad_enabled()
            with lib.enable_grad():
                yield lib.is_grad_enabled()
            yield lib.is_grad_enabled()
            return "done"

        g = gen()
        seen = []
        try:
            while True:
                seen.append((next(g), lib.is_grad_enabled()))
        except StopIteration as stop:
            return seen, stop.value

    assert run(trainkit) == run(torch)


def test_generator_throw_runs_under_the_guard(torch):
    def run(lib):
        @lib.no_grad()
        def gen():
            try:
                yield 1
            except KeyError:
                yield ("caught", lib.is_grad_enabled())

        g = gen()
        next(g)
        return g.throw(KeyError("k")), lib.is_grad_enabled()

    assert run(trainkit) == run(torch)


def test_decorators_keep_name_and_nest(torch):
    def run(lib):
        @lib.no_grad()
        def f():
            """doc"""
            return lib.is_grad_enabled()

        @lib.enable_grad
        def g():
            return lib.is_grad_enabled()

        @lib.set_grad_enabled(False)
        def h():
            return lib.is_grad_enabled()

        out = [f.__name__, f.__doc__, f(), h(), lib.is_grad_enabled()]
        with lib.no_grad():
            out += [g(), lib.is_grad_enabled()]
            with lib.enable_grad():
                out.append(lib.is_grad_enabled())
                with lib.set_grad_enabled(False):
                    out.append(lib.is_grad_enabled())
                out.append(lib.is_grad_enabled())
        out.append(lib.is_grad_enabled())
        guard = lib.no_grad()
        with guard:
            with guard:
                out.append(lib.is_grad_enabled())
            out.append(lib.is_grad_enabled())
        out.append(type(guard.clone()).__name__)
        lib.set_grad_enabled(True)  # the guard entered twice restores the mode its second entry saw, as in PyTorch
        return out

    assert run(trainkit) == run(torch)


def test_iteration_gives_unbind_nodes(torch):
    def run(lib):
        a = lib.arange(6.0).reshape(2, 3).requires_grad_()
        rows = list(a)
        first, _ = a
        (rows[0] * 2 + rows[1]).sum().backward()
        return [type(r.grad_fn).__name__ for r in rows] + [type(first.grad_fn).__name__], a.grad.numpy().tolist()

    assert run(trainkit) == run(torch)


@pytest.mark.parametrize("convert", [int, float, complex])
def test_scalar_conversion_of_many_elements_is_value_error(torch, convert):
    assert_same_error(torch, lambda lib, dev: convert(lib.tensor([1.5, 2.0])), "one element")
    tk, th = _both(torch, lambda lib: convert(lib.tensor([[2.5]])))
    assert tk == th and type(tk) is type(th)


def test_format_of_a_0d_tensor(torch):
    tk, th = _both(torch, lambda lib: (f"{lib.tensor(2.5):.2f}", f"{lib.tensor(3):>4}"))
    assert tk == th
    assert_same_error(torch, lambda lib, dev: f"{lib.tensor([2.5]):.2f}")


def test_iteration_over_0d_is_type_error(torch):
    assert_same_error(torch, lambda lib, dev: list(lib.tensor(1.0)))
    tk, th = _both(torch, lambda lib: [np.asarray(r).tolist() for r in lib.zeros(0, 2)])
    assert tk == th
