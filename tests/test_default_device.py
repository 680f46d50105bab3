"""set_default_device, get_default_device and ``with trainkit.device(...)``: which factories follow the default
device (as in PyTorch), how the setting nests and resets, and that modules built afterwards live there."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import CUDA

import trainkit


@pytest.fixture(autouse=True)
def _reset_default_device():
    yield
    trainkit.set_default_device(None)


# name -> fn(lib): each makes one tensor without naming a device
FACTORIES = {
    "tensor": lambda L: L.tensor([1.0, 2.0]),
    "tensor_of_tensor": lambda L: L.tensor(L.ones(2, device="cpu")),
    "as_tensor_list": lambda L: L.as_tensor([1, 2]),
    "as_tensor_of_tensor": lambda L: L.as_tensor(L.ones(2, device="cpu")),
    "zeros": lambda L: L.zeros(2, 3),
    "ones": lambda L: L.ones((2,)),
    "empty": lambda L: L.empty(2),
    "full": lambda L: L.full((2,), 3.0),
    "arange": lambda L: L.arange(4),
    "linspace": lambda L: L.linspace(0, 1, 3),
    "eye": lambda L: L.eye(2),
    "rand": lambda L: L.rand(2),
    "randn": lambda L: L.randn(2),
    "randint": lambda L: L.randint(0, 5, (2,)),
    "randperm": lambda L: L.randperm(3),
    "zeros_like": lambda L: L.zeros_like(L.ones(2, device="cpu")),
    "ones_like": lambda L: L.ones_like(L.ones(2, device="cpu")),
    "empty_like": lambda L: L.empty_like(L.ones(2, device="cpu")),
    "full_like": lambda L: L.full_like(L.ones(2, device="cpu"), 2),
    "rand_like": lambda L: L.rand_like(L.ones(2, device="cpu")),
    "randn_like": lambda L: L.randn_like(L.ones(2, device="cpu")),
    "from_numpy": lambda L: L.from_numpy(np.zeros(2, dtype=np.float32)),
    "new_zeros": lambda L: L.ones(2, device="cpu").new_zeros(3),
}


def _follows_in_torch(torch, make) -> bool:
    with torch.device("meta"):
        return make(torch).device.type == "meta"


def _follows_here(make) -> bool:
    """Whether ``make`` puts its tensor on the default device (CUDA here): without a GPU, asking for it fails."""
    with trainkit.device("cuda"):
        try:
            t = make(trainkit)
        except RuntimeError as err:
            assert "CUDA was asked for" in str(err)
            return True
    return t.device.type == "cuda"


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_factories_that_follow_the_default_device_are_torchs(torch, name):
    assert _follows_here(FACTORIES[name]) == _follows_in_torch(torch, FACTORIES[name])


def test_get_default_device_starts_on_the_cpu_and_resets(torch):
    for lib in (trainkit, torch):
        assert repr(lib.get_default_device()) == "device(type='cpu')"
        lib.set_default_device("cpu")
        assert repr(lib.get_default_device()) == "device(type='cpu')"
        assert lib.zeros(1).device.type == "cpu"
        lib.set_default_device(None)
        assert repr(lib.get_default_device()) == "device(type='cpu')"


def test_device_is_a_context_manager(torch):
    for lib in (trainkit, torch):
        d = lib.device("cpu")
        with d as entered:
            assert entered is d
            assert lib.get_default_device() == d
            assert lib.ones(2).device == d
        with pytest.raises(ValueError), lib.device("cpu"):
            raise ValueError("the block is left by an exception")
        assert lib.get_default_device() == lib.device("cpu")


def test_blocks_nest_and_the_innermost_wins():
    state = trainkit.autograd.backend.device_state
    trainkit.set_default_device("cuda")
    with trainkit.device("cpu"):
        assert state.current == trainkit.device("cpu")
        assert trainkit.zeros(1).device.type == "cpu"
        with trainkit.device("cuda:1"):
            assert state.current == trainkit.device("cuda:1")
        assert state.current == trainkit.device("cpu")
        trainkit.set_default_device("cuda:2")  # changes the setting outside the blocks, not the block in effect
        assert trainkit.zeros(1).device.type == "cpu"
    assert state.current == trainkit.device("cuda:2")
    trainkit.set_default_device(None)
    assert state.current is None and state.blocks == ()


def test_set_default_device_checks_its_argument(torch):
    for lib in (trainkit, torch):
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            lib.set_default_device("foo")
        assert lib.get_default_device() == lib.device("cpu")


def test_the_default_device_is_per_thread():
    trainkit.set_default_device("cuda")
    seen = []
    worker = threading.Thread(target=lambda: seen.append((trainkit.get_default_device(), trainkit.zeros(1).device)))
    worker.start()
    worker.join()
    assert seen == [(trainkit.device("cpu"), trainkit.device("cpu"))]


def test_an_explicit_device_wins_over_the_default():
    trainkit.set_default_device("cuda")
    assert trainkit.zeros(2, device="cpu").device.type == "cpu"
    assert trainkit.tensor([1, 2], device="cpu").device.type == "cpu"
    assert trainkit.nn.Linear(2, 3, device="cpu").weight.device.type == "cpu"


def test_modules_built_under_a_default_device_live_there(device):
    trainkit.set_default_device(device)
    want = trainkit.get_default_device()
    assert want.type == device and (device == "cpu" or want.index is not None)
    lin = trainkit.nn.Linear(3, 2)
    bn = trainkit.nn.BatchNorm1d(2)
    emb = trainkit.nn.Embedding(5, 2)
    for t in (lin.weight, lin.bias, bn.weight, bn.running_mean, bn.num_batches_tracked, emb.weight):
        assert t.device.type == device
    out = lin(trainkit.randn(4, 3))
    assert out.device.type == device and out.dtype == trainkit.float32


def test_factories_follow_the_default_device(device):
    with trainkit.device(device):
        for name, make in FACTORIES.items():
            t = make(trainkit)
            expected = device if _follows_in_set(name) else "cpu"
            assert t.device.type == expected, name


def _follows_in_set(name: str) -> bool:
    return not (name.endswith("_like") or name in ("from_numpy", "new_zeros"))


@pytest.mark.skipif(not CUDA, reason="no usable GPU")
def test_cuda_without_index_reports_the_current_gpu(torch):
    trainkit.set_default_device("cuda")
    assert trainkit.get_default_device() == trainkit.device("cuda", 0)
    assert trainkit.zeros(1).device == trainkit.device("cuda:0")
