"""The workspace pool: large arrays reused across steps, never while anything can still read them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import trainkit
import trainkit.nn.functional as F
from trainkit.autograd import workspace

BIG = (512, 1024)  # 2 MiB of float32: above workspace.MIN_BYTES


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch):
    monkeypatch.setattr(workspace, "LIMIT_BYTES", 64 << 20)
    workspace.clear()
    yield
    workspace.clear()


def test_empty_gives_the_shape_and_dtype_asked_for():
    a = workspace.empty(BIG, np.float32)
    b = workspace.empty((3, 4), np.float64)  # small: an ordinary array, not pooled
    assert (a.shape, a.dtype, b.shape, b.dtype) == (BIG, np.float32, (3, 4), np.float64)
    assert a.flags.c_contiguous and a.flags.writeable
    assert workspace.stats() == {"bytes": a.nbytes, "arrays": 1, "in_use": 1}


def test_an_array_is_reused_only_once_nothing_holds_it():
    a = workspace.empty(BIG, np.float32)
    address = a.ctypes.data
    b = workspace.empty(BIG, np.float32)
    assert b.ctypes.data != address  # a is still held
    del a
    c = workspace.empty(BIG, np.float32)
    assert c.ctypes.data == address  # nothing held it any more: reused
    del b, c
    assert workspace.stats()["in_use"] == 0


def _hold(kind: str):
    """A pooled array filled with 7, kept only through a holder of ``kind``."""
    a = workspace.empty(BIG, np.float32)
    a[...] = 7
    makers = {
        "view": lambda: a[1:, ::2],
        "tensor": lambda: trainkit.from_numpy(a),
        "numpy": lambda: trainkit.from_numpy(a).numpy(),
        "memoryview": lambda: memoryview(a),
        "list": lambda: [a],
    }
    return makers[kind]()


@pytest.mark.parametrize("hold", ["view", "tensor", "numpy", "memoryview", "list"])
def test_any_holder_keeps_an_array_out_of_reuse(hold):
    holder = _hold(hold)
    for _ in range(3):
        workspace.empty(BIG, np.float32)[...] = -1  # taken and dropped at once
    kept = holder if hold != "list" else holder[0]
    kept = np.asarray(kept)
    assert (kept == 7).all()


def test_a_graph_that_saved_an_array_keeps_it_until_freed():
    x = trainkit.randn(64, 16, 16, 16, requires_grad=True)
    y = F.relu(x)  # ReLU saves its output, a pooled array
    total = (y * 1.0).sum()
    address = y._data.ctypes.data
    positive = y.detach().numpy() > 0
    del y  # only the graph holds the output now
    assert workspace.stats()["in_use"] == 1  # the output came from the pool
    z = F.relu(trainkit.randn(64, 16, 16, 16))
    assert z._data.ctypes.data != address
    z._data[...] = 0  # would have zeroed the saved output, had it been handed out again
    total.backward()
    assert np.array_equal(x.grad.numpy(), positive.astype(np.float32))


def test_convolution_outputs_held_by_the_user_stay_intact():
    trainkit.manual_seed(0)
    conv = trainkit.nn.Conv2d(16, 32, 3, padding=1)
    x1, x2 = trainkit.randn(16, 16, 14, 14), trainkit.randn(16, 16, 14, 14)
    with trainkit.no_grad():
        y1 = conv(x1)
        first = y1.numpy().copy()
        for _ in range(3):
            conv(x2)
    assert np.array_equal(y1.numpy(), first)


def test_training_steps_give_the_same_numbers_with_and_without_the_pool(monkeypatch):
    def run():
        trainkit.manual_seed(0)
        model = trainkit.nn.Sequential(
            trainkit.nn.Conv2d(1, 16, 3, padding=1),
            trainkit.nn.ReLU(),
            trainkit.nn.MaxPool2d(2),
            trainkit.nn.Conv2d(16, 32, 3, padding=1),
            trainkit.nn.ReLU(),
            trainkit.nn.MaxPool2d(2),
            trainkit.nn.Flatten(),
            trainkit.nn.Linear(32 * 7 * 7, 10),
        )
        opt = trainkit.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = trainkit.randn(64, 1, 28, 28), trainkit.randint(0, 10, (64,))
        losses = []
        for _ in range(4):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    pooled = run()
    assert workspace.stats()["bytes"] > 0
    monkeypatch.setattr(workspace, "LIMIT_BYTES", 0)
    workspace.clear()
    plain = run()
    assert workspace.stats()["bytes"] == 0
    assert pooled[0] == plain[0]
    for a, b in zip(pooled[1], plain[1]):
        assert np.array_equal(a, b)


def test_the_limit_evicts_free_arrays_and_then_stops_pooling(monkeypatch):
    monkeypatch.setattr(workspace, "LIMIT_BYTES", 3 * (2 << 20))
    a = workspace.empty(BIG, np.float32)
    b = workspace.empty((1024, 512), np.float32)
    del b  # free: may be evicted for another shape
    c = workspace.empty((256, 2048), np.float32)
    d = workspace.empty((128, 4096), np.float32)
    assert workspace.stats()["bytes"] <= workspace.LIMIT_BYTES
    e = workspace.empty((64, 8192), np.float32)  # all pooled arrays in use: an ordinary one
    assert workspace.stats()["bytes"] <= workspace.LIMIT_BYTES
    assert len({x.ctypes.data for x in (a, c, d, e)}) == 4


def test_clear_releases_free_arrays_and_lets_arrays_in_use_go():
    kept = workspace.empty(BIG, np.float32)
    kept[...] = 3
    workspace.empty((1024, 512), np.float32)
    assert workspace.clear() == 1024 * 512 * 4  # the free one; the kept one leaves the pool
    assert workspace.stats() == {"bytes": 0, "arrays": 0, "in_use": 0}
    assert (kept == 3).all()


def test_threads_never_share_an_array():
    taken, errors = [], []
    barrier = threading.Barrier(4)

    def take(value):
        barrier.wait()
        for _ in range(200):
            a = workspace.empty(BIG, np.float32)
            a.fill(value)
            if not (a == value).all():
                errors.append(value)
            taken.append(a.ctypes.data)
            del a

    threads = [threading.Thread(target=take, args=(v,)) for v in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert workspace.stats()["arrays"] <= 4


def test_the_environment_variable_turns_the_pool_off(tmp_path):
    code = (
        "import numpy as np, trainkit, trainkit.nn.functional as F\n"
        "from trainkit.autograd import workspace\n"
        "F.relu(trainkit.randn(64, 16, 28, 28))\n"
        "print(workspace.LIMIT_BYTES, workspace.stats()['bytes'])\n"
    )
    env = dict(os.environ, TRAINKIT_WORKSPACE_MB="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0"]


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_bad_limit_in_the_environment_is_named(value):
    code = "import trainkit"
    env = dict(os.environ, TRAINKIT_WORKSPACE_MB=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert f"TRAINKIT_WORKSPACE_MB={value!r} is not a size" in out.stderr


def test_an_empty_limit_in_the_environment_is_the_default():
    code = "from trainkit.autograd import workspace; print(workspace.LIMIT_BYTES)"
    env = dict(os.environ, TRAINKIT_WORKSPACE_MB="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(512 << 20)]
