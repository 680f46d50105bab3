"""trainkit.autocast against torch.autocast on the CPU: the dtype of every intermediate and output, the graph's casts
and the gradients' dtypes, the state functions, nesting, the decorator, the cache and the warnings."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit.autograd.autocast import POLICY, autocast_inputs

LOW = ["bfloat16", "float16"]


def dtype_name(t) -> str:
    return str(t.dtype).split(".")[1]


def names(fn) -> list:
    return [None if f is None else f.name() for f, _ in fn.next_functions]


def weights(lib, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    return {
        "x": lib.tensor(rng.standard_normal((4, 3)).astype(np.float32)),
        "w1": lib.tensor(rng.standard_normal((6, 3)).astype(np.float32), requires_grad=True),
        "b1": lib.tensor(rng.standard_normal(6).astype(np.float32), requires_grad=True),
        "w2": lib.tensor(rng.standard_normal((2, 6)).astype(np.float32), requires_grad=True),
        "b2": lib.tensor(rng.standard_normal(2).astype(np.float32), requires_grad=True),
        "y": lib.tensor(rng.standard_normal((4, 2)).astype(np.float32)),
    }


def two_layers(lib, p, low):
    F = lib.nn.functional
    seen = {}
    with lib.autocast("cpu", dtype=getattr(lib, low)):
        seen["hidden"] = h = F.linear(p["x"], p["w1"], p["b1"])
        seen["relu"] = r = h.relu()
        seen["out"] = out = F.linear(r, p["w2"], p["b2"])
        seen["diff"] = d = out - p["y"]
        seen["loss"] = loss = (d.float() ** 2).mean()
    loss.backward()
    return seen


@pytest.mark.parametrize("low", LOW)
def test_two_layers_dtypes_graph_and_gradients_match_torch(torch, low):
    p, tp = weights(trainkit), weights(torch)
    got, expected = two_layers(trainkit, p, low), two_layers(torch, tp, low)
    for key in expected:
        assert dtype_name(got[key]) == dtype_name(expected[key]), key
    assert names(got["hidden"].grad_fn) == names(expected["hidden"].grad_fn)  # ToCopyBackward0, None, TBackward0
    assert got["hidden"].grad_fn.name() == expected["hidden"].grad_fn.name() == "AddmmBackward0"
    for key in ("w1", "b1", "w2", "b2"):
        assert p[key].grad.dtype is trainkit.float32, key
        np.testing.assert_allclose(to_numpy(p[key].grad), to_numpy(tp[key].grad), rtol=0.05, atol=0.05)
    np.testing.assert_allclose(got["loss"].item(), expected["loss"].item(), rtol=0.02)


def layer_outputs(lib, low):
    lib.manual_seed(0)
    F, nn = lib.nn.functional, lib.nn
    out = {}
    with lib.autocast("cpu", dtype=getattr(lib, low)):
        out["conv2d"] = F.conv2d(lib.ones(1, 2, 5, 5), lib.ones(3, 2, 3, 3), lib.ones(3))
        out["conv1d"] = F.conv1d(lib.ones(1, 2, 5), lib.ones(3, 2, 3))
        out["conv_transpose2d"] = F.conv_transpose2d(lib.ones(1, 2, 3, 3), lib.ones(2, 3, 2, 2))
        out["conv_transpose1d"] = F.conv_transpose1d(lib.ones(1, 2, 3), lib.ones(2, 3, 2))
        out["prelu"] = F.prelu(lib.ones(2, 3), lib.tensor([0.25]))
        if low == "bfloat16":  # torch's oneDNN layer has no float16 LSTM on the CPU
            o, (h, c) = nn.LSTM(3, 4, batch_first=True)(lib.ones(2, 5, 3))
            out["lstm"], out["lstm_h"], out["lstm_c"] = o, h, c
            out["rnn"] = nn.RNN(3, 4)(lib.ones(5, 2, 3))[0]
        out["gru"] = nn.GRU(3, 4)(lib.ones(5, 2, 3))[0]  # not on the CPU list: float32
        out["lstm_cell"] = nn.LSTMCell(3, 4)(lib.ones(2, 3))[0]
        out["float64"] = F.linear(lib.ones(2, 3, dtype=lib.float64), lib.ones(4, 3, dtype=lib.float64))
        out["half_in"] = F.linear(lib.ones(2, 3, dtype=lib.float16), lib.ones(4, 3), lib.ones(4))
        out["relu"] = lib.ones(3).relu()
        out["embedding"] = F.embedding(lib.tensor([0, 1]), lib.ones(3, 2))
        out["dropout"] = F.dropout(out["conv2d"], 0.5)
    return out


@pytest.mark.parametrize("low", LOW)
def test_layer_outputs_take_torch_dtypes(torch, low):
    got, expected = layer_outputs(trainkit, low), layer_outputs(torch, low)
    assert {k: dtype_name(v) for k, v in got.items()} == {k: dtype_name(v) for k, v in expected.items()}


def test_policy_rows_cast_as_their_list_says():
    x = trainkit.ones(2, 2)
    assert autocast_inputs("linear", x)[0] is x  # outside autocast: untouched
    with trainkit.autocast("cpu"):
        assert autocast_inputs("linear", x)[0].dtype is trainkit.bfloat16
        low = x.to(trainkit.bfloat16)
        assert autocast_inputs("mse_loss", low)[0].dtype is trainkit.float32
        assert autocast_inputs("softmax", low)[0] is low  # on CUDA's list only
        assert autocast_inputs("not_an_op", x)[0] is x
        ints = trainkit.ones(2, dtype=trainkit.int64)
        assert autocast_inputs("linear", ints, None, 3)[0] is ints
    assert POLICY["gru"] == (None, "lower_precision_fp") and POLICY["cross_entropy"][0] == "fp32"


def test_state_functions_nesting_and_decorator(torch):
    for lib in (trainkit, torch):
        assert not lib.is_autocast_enabled("cpu")
        assert lib.get_autocast_dtype("cpu") == lib.bfloat16 and lib.get_autocast_dtype("cuda") == lib.float16
        with lib.autocast("cpu", dtype=lib.float16):
            assert lib.is_autocast_enabled("cpu") and not lib.is_autocast_enabled()  # no argument: CUDA's
            assert lib.get_autocast_dtype("cpu") == lib.float16
            with lib.autocast("cpu", enabled=False):
                assert not lib.is_autocast_enabled("cpu")
                assert lib.mm(lib.ones(2, 2), lib.ones(2, 2)).dtype == lib.float32
            assert lib.is_autocast_enabled("cpu")
        assert lib.get_autocast_dtype("cpu") == lib.bfloat16 and not lib.is_autocast_enabled("cpu")

        @lib.autocast("cpu")
        def product(a, b, lib=lib):
            return lib.nn.functional.linear(a, b, lib.zeros(4))

        assert product(lib.ones(2, 3), lib.ones(4, 3)).dtype == lib.bfloat16
        assert product.__name__ == "product" and not lib.is_autocast_enabled("cpu")
    assert trainkit.amp.autocast is trainkit.autocast


def test_the_weight_cast_is_cached_inside_a_region_only():
    w = trainkit.ones(4, 3, requires_grad=True)
    x = trainkit.ones(2, 3)
    with trainkit.autocast("cpu"):
        a = trainkit.nn.functional.linear(x, w)
        b = trainkit.nn.functional.linear(x, w)
    with trainkit.autocast("cpu"):
        c = trainkit.nn.functional.linear(x, w)
    with trainkit.autocast("cpu", cache_enabled=False):
        d = trainkit.nn.functional.linear(x, w)
        e = trainkit.nn.functional.linear(x, w)

    def cast_of(out):  # the weight's ToCopyBackward0 under the product's transpose
        node = next(f for f, _ in out.grad_fn.next_functions if f is not None and f.name() == "TBackward0")
        return node.next_functions[0][0]

    assert cast_of(a) is cast_of(b)
    assert cast_of(c) is not cast_of(a)
    assert cast_of(d) is not cast_of(e)
    assert trainkit.is_autocast_cache_enabled()


def test_autocast_is_per_thread():
    seen = []
    with trainkit.autocast("cpu"):
        thread = threading.Thread(target=lambda: seen.append(trainkit.is_autocast_enabled("cpu")))
        thread.start()
        thread.join()
        assert trainkit.is_autocast_enabled("cpu")
    assert seen == [False]


def caught(fn):
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        result = fn()
    return result, [(w.category, str(w.message)) for w in found]


@pytest.mark.skipif(trainkit.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_without_a_gpu_warns_and_disables(torch):
    for lib in (trainkit, torch):

        def enter(lib=lib):
            with lib.autocast("cuda"):
                return lib.is_autocast_enabled("cuda")

        enabled, found = caught(enter)
        assert not enabled
        assert found == [(UserWarning, "CUDA is not available or torch_xla is imported. Disabling autocast.")]

        ctx, found = caught(lib.cuda.amp.autocast)
        assert isinstance(ctx, lib.amp.autocast)
        assert found[0] == (
            FutureWarning,
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` "
            "instead.",
        )


def test_unsupported_dtype_and_device_type(torch):
    for lib in (trainkit, torch):
        ctx, found = caught(lambda lib=lib: lib.autocast("cpu", dtype=lib.float64))
        assert found and found[0][0] is UserWarning and "Disabling autocast" in found[0][1]
        with ctx:
            assert not lib.is_autocast_enabled("cpu")
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.autocast(3)
        with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
            lib.autocast("foo")
