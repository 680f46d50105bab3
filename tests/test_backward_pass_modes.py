"""A backward pass restores grad mode and create_graph however it ends, and saved tensors unpack as arrays in a
plain pass and as Tensors in a create_graph pass, also when one runs inside the other."""

import threading

import pytest

import trainkit
from trainkit.autograd import grad_mode


def test_passes_leave_no_mode_behind_even_when_they_raise():
    x = trainkit.tensor([0.5], requires_grad=True)
    y = (x * x).tanh()
    (g,) = trainkit.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and not grad_mode.creating_passes and not grad_mode.state.create_graph
    z = x * x
    z.backward()
    with pytest.raises(RuntimeError):
        trainkit.autograd.grad(z, x, create_graph=True)  # freed: the pass raises
    assert not grad_mode.creating_passes and not grad_mode.state.create_graph and grad_mode.state.enabled


def test_plain_pass_inside_a_create_graph_pass_sees_arrays():
    x = trainkit.tensor([0.3], requires_grad=True)
    w = trainkit.tensor([2.0], requires_grad=True)
    seen = []

    def hook(grad):  # runs inside the create_graph pass; its own plain pass must get arrays
        inner = (w * w).tanh()
        inner.backward()
        seen.append(w.grad.clone())
        return grad

    y = (x * w).tanh()
    y.register_hook(hook)
    (gx,) = trainkit.autograd.grad(y, x, create_graph=True)
    assert gx.requires_grad and len(seen) == 1
    assert not grad_mode.creating_passes


def test_other_threads_keep_their_own_create_graph_flag():
    x = trainkit.tensor([0.7], requires_grad=True)
    results = []

    def plain():
        y = (x * x).tanh()
        (g,) = trainkit.autograd.grad(y, x)
        results.append(g.requires_grad)

    grad_mode.creating_passes.append(None)  # as if a create_graph pass ran in another thread
    try:
        thread = threading.Thread(target=plain)
        thread.start()
        thread.join()
    finally:
        grad_mode.creating_passes.pop()
    assert results == [False]


def test_grad_mode_off_in_one_thread_leaves_others_recording():
    x = trainkit.tensor([0.7], requires_grad=True)
    inside, outside = threading.Event(), threading.Event()
    results = {}

    def quiet():
        with trainkit.no_grad():
            inside.set()
            outside.wait()
            results["quiet"] = (x * x).requires_grad

    thread = threading.Thread(target=quiet)
    thread.start()
    inside.wait()
    results["main"] = (x * x).requires_grad  # the other thread is inside no_grad now
    outside.set()
    thread.join()
    assert results == {"quiet": False, "main": True}
    assert not grad_mode.disabled_threads and trainkit.is_grad_enabled()


def test_set_grad_enabled_as_a_call_holds_until_set_back():
    x = trainkit.tensor([0.7], requires_grad=True)
    trainkit.set_grad_enabled(False)
    try:
        assert not (x * x).requires_grad and not trainkit.is_grad_enabled()
    finally:
        trainkit.set_grad_enabled(True)
    assert (x * x).requires_grad and not grad_mode.disabled_threads
