"""trainkit.save / trainkit.load: round trips without pickle, and clear errors for what cannot be saved."""

from __future__ import annotations

import io
from collections import OrderedDict

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.serialization import load, save
from trainkit.training import checkpoint


def _model():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_state_dict_round_trip_loads_into_model(tmp_path):
    trainkit.manual_seed(0)
    model = _model()
    path = tmp_path / "model.pt"
    save(model.state_dict(), path)
    state = load(path)
    assert isinstance(state, OrderedDict)
    assert list(state) == list(model.state_dict())
    trainkit.manual_seed(1)
    other = _model()
    other.load_state_dict(state)
    x = trainkit.randn(3, 4)
    np.testing.assert_array_equal(other(x).detach().numpy(), model(x).detach().numpy())
    for key, value in model.state_dict().items():
        assert isinstance(state[key], trainkit.Tensor)
        assert state[key].dtype == value.dtype
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())


def test_nested_structures_and_dtypes(tmp_path):
    obj = {
        "f16": trainkit.ones(2, dtype=trainkit.float16),
        "f64": trainkit.tensor([[1.5, 2.5]], dtype=trainkit.float64),
        "i64": trainkit.arange(5),
        "u8": trainkit.tensor([1, 255], dtype=trainkit.uint8),
        "b": trainkit.tensor([True, False]),
        "scalar": trainkit.tensor(3.0),
        "array": np.arange(6, dtype=np.int32).reshape(2, 3),
        "list": [1, 2.5, "x", None, True, [trainkit.zeros(1)]],
        "tuple": (1, ("a", (2,))),
        7: {"nested": {"deep": [(None,)]}},
        "np_number": np.float32(0.5),
    }
    path = tmp_path / "obj.npz"  # NumPy arrays: trainkit's own format (a .pt file holds tensors, as torch's)
    save(obj, path)
    out = load(path)
    assert list(out) == list(obj)
    for key in ("f16", "f64", "i64", "u8", "b", "scalar"):
        assert isinstance(out[key], trainkit.Tensor)
        assert out[key].dtype == obj[key].dtype
        assert out[key].shape == obj[key].shape
        np.testing.assert_array_equal(out[key].numpy(), obj[key].numpy())
    assert isinstance(out["array"], np.ndarray) and out["array"].dtype == np.int32
    np.testing.assert_array_equal(out["array"], obj["array"])
    assert out["list"][:5] == [1, 2.5, "x", None, True]
    assert isinstance(out["list"][5][0], trainkit.Tensor)
    assert out["tuple"] == (1, ("a", (2,)))
    assert out[7] == {"nested": {"deep": [(None,)]}}
    assert out["np_number"] == 0.5


def test_file_objects():
    buffer = io.BytesIO()
    save([trainkit.ones(2), {"k": (1, 2)}], buffer)
    buffer.seek(0)
    out = load(buffer)
    assert out[1] == {"k": (1, 2)}
    np.testing.assert_array_equal(out[0].numpy(), [1.0, 1.0])


def test_requires_grad_and_parameters_kept(tmp_path):
    w = trainkit.ones(2, requires_grad=True)
    p = nn.Parameter(trainkit.zeros(3))
    save({"w": w, "p": p, "y": w * 2}, tmp_path / "t.pt")
    out = load(tmp_path / "t.pt")
    assert out["w"].requires_grad and out["w"].is_leaf
    assert isinstance(out["p"], nn.Parameter) and out["p"].requires_grad
    assert out["y"].requires_grad and out["y"].grad_fn is None  # a leaf now, as torch.load gives it


def test_map_location(tmp_path, device):
    save({"w": trainkit.ones(2)}, tmp_path / "t.pt")
    out = load(tmp_path / "t.pt", map_location=device)
    assert out["w"].device.type == trainkit.device(device).type
    out = load(tmp_path / "t.pt", map_location=trainkit.device("cpu"))
    assert out["w"].device == trainkit.device("cpu")
    out = load(tmp_path / "t.pt", map_location=lambda storage, location: storage)  # torch's callable form
    assert out["w"].device == trainkit.device("cpu")
    with pytest.raises(TypeError, match="map_location"):
        load(tmp_path / "t.pt", map_location=3.5)


def test_saving_a_module_says_to_save_its_state_dict(tmp_path):
    with pytest.raises(TypeError, match=r"state_dict\(\)") as info:
        save(_model(), tmp_path / "m.npz")  # trainkit's own archive holds no pickles (a .pt name holds any object)
    assert "Sequential" in str(info.value)
    assert not (tmp_path / "m.npz").exists()
    assert list(tmp_path.iterdir()) == []


def test_arbitrary_object_error_names_its_path(tmp_path):
    class Thing:
        pass

    with pytest.raises(TypeError) as info:
        save({"model": {"layers": [1, Thing()]}}, tmp_path / "x.npz")
    message = str(info.value)
    assert "['model']['layers'][1]" in message
    assert "Thing" in message
    assert "state_dict()" in message
    with pytest.raises(TypeError, match="keys must be strings or ints"):
        save({(1, 2): 3}, tmp_path / "x.npz")
    with pytest.raises(TypeError, match="Python objects"):
        save({"a": np.array([object()])}, tmp_path / "x.npz")


def test_weights_only_false_reads_a_trusted_file(tmp_path):
    save({"a": 1}, tmp_path / "x.pt")
    assert load(tmp_path / "x.pt", weights_only=False) == {"a": 1}


def test_reads_checkpoints_and_rejects_other_files(tmp_path):
    checkpoint.save({"w": trainkit.ones(2), "epoch": 3}, tmp_path / "c.npz")
    out = load(tmp_path / "c.npz")
    assert out["epoch"] == 3 and isinstance(out["w"], trainkit.Tensor)
    np.savez(tmp_path / "plain.npz", x=np.ones(2))
    with pytest.raises(ValueError, match="not a file written by trainkit.save"):
        load(tmp_path / "plain.npz")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.pt")


def test_pickled_content_is_never_loaded(tmp_path):
    np.savez(tmp_path / "evil.npz", __meta__=np.array(['{"s:x": {"__array__": 0}}']), a0=np.array([object()]))
    with pytest.raises(ValueError):
        load(tmp_path / "evil.npz")


def test_optimizer_state_dict_round_trip(tmp_path):
    model = _model()
    opt = trainkit.optim.Adam(model.parameters(), lr=0.01)
    model(trainkit.randn(2, 4)).sum().backward()
    opt.step()
    save(opt.state_dict(), tmp_path / "opt.pt")
    state = load(tmp_path / "opt.pt")
    opt2 = trainkit.optim.Adam(_model().parameters(), lr=0.5)
    opt2.load_state_dict(state)
    assert opt2.param_groups[0]["lr"] == 0.01
