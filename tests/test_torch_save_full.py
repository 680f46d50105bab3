"""trainkit.save / trainkit.load as torch.save / torch.load: any picklable object in PyTorch's zip format, files
read both ways, weights_only with torch's allowlist, safe globals and error, map_location, file objects."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import re
import threading
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from conftest import to_numpy

import trainkit
from trainkit.serialization import (
    TorchFileError,
    UnsafeGlobalError,
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    get_unsafe_globals_in_checkpoint,
    safe_globals,
)


@dataclasses.dataclass
class RunInfo:
    """A user's own class inside a checkpoint."""

    name: str
    steps: int


class Evil:
    """Pickles as a call to os.system: what a hostile checkpoint holds."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.fixture(autouse=True)
def _no_safe_globals(torch):
    clear_safe_globals()
    before = torch.serialization.get_safe_globals()
    yield
    clear_safe_globals()
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(before)


def _model(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))


def _unsupported_line(message: str) -> str:
    line = next(s for s in message.splitlines() if "WeightsUnpickler error" in s)
    return line.strip().replace("torch.serialization", "trainkit.serialization")


# ---- trainkit -> torch and torch -> trainkit ------------------------------------------------------------------------


def test_state_dict_and_optimizer_state_both_ways(torch, tmp_path):
    model = _model(trainkit)
    optimizer = trainkit.optim.Adam(model.parameters(), lr=0.01)
    model(trainkit.randn(5, 3)).sum().backward()
    optimizer.step()
    trainkit.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}, tmp_path / "c.pt")
    loaded = torch.load(tmp_path / "c.pt")  # torch's default, weights_only=True
    reference = _model(torch)
    reference.load_state_dict(loaded["model"])
    torch_optimizer = torch.optim.Adam(reference.parameters(), lr=0.01)
    torch_optimizer.load_state_dict(loaded["optimizer"])
    assert loaded["epoch"] == 3 and loaded["optimizer"]["param_groups"][0]["lr"] == 0.01
    for key, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            np.testing.assert_array_equal(to_numpy(loaded["optimizer"]["state"][key][name]), to_numpy(value))
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(
        to_numpy(reference(torch.tensor(x))), to_numpy(model(trainkit.tensor(x))), rtol=1e-6, atol=1e-6
    )

    torch_optimizer.step()  # and back: what torch saves loads into trainkit's model and optimizer
    torch.save({"model": reference.state_dict(), "optimizer": torch_optimizer.state_dict()}, tmp_path / "t.pt")
    back = trainkit.load(tmp_path / "t.pt")
    model.load_state_dict(back["model"])
    optimizer.load_state_dict(back["optimizer"])
    np.testing.assert_allclose(
        to_numpy(reference(torch.tensor(x))), to_numpy(model(trainkit.tensor(x))), rtol=1e-6, atol=1e-6
    )
    assert isinstance(back["optimizer"]["state"][0]["exp_avg"], trainkit.Tensor)


def test_nested_containers_both_ways(torch, tmp_path):
    def nested(lib):
        return {
            "list": [lib.arange(3), (1, 2.5, "x", None, True)],
            "ordered": OrderedDict([("b", lib.ones(2, 2, dtype=lib.float64)), ("a", [])]),
            "ints": {0: lib.tensor([1, 2], dtype=lib.int32), 7: "seven"},
            "scalar": lib.tensor(3.5),
            "empty": lib.zeros(0, 3),
            "flag": lib.tensor([True, False]),
        }

    trainkit.save(nested(trainkit), tmp_path / "ours.pt")
    torch.save(nested(torch), tmp_path / "theirs.pt")
    for path in ("ours.pt", "theirs.pt"):
        for got in (torch.load(tmp_path / path), trainkit.load(tmp_path / path)):
            assert list(got) == ["list", "ordered", "ints", "scalar", "empty", "flag"]
            assert isinstance(got["ordered"], OrderedDict) and list(got["ordered"]) == ["b", "a"]
            assert got["list"][1] == (1, 2.5, "x", None, True) and got["ints"][7] == "seven"
            np.testing.assert_array_equal(to_numpy(got["list"][0]), [0, 1, 2])
            assert to_numpy(got["ordered"]["b"]).dtype == np.float64
            assert to_numpy(got["ints"][0]).dtype == np.int32 and to_numpy(got["flag"]).dtype == np.bool_
            assert tuple(got["empty"].shape) == (0, 3) and tuple(got["scalar"].shape) == ()


def test_objects_numpy_and_dataclasses_load_with_weights_only_false(torch, tmp_path):
    saved = {"info": RunInfo("run", 12), "array": np.arange(6).reshape(2, 3), "text": "hello", "n": np.float32(2)}
    trainkit.save(saved, tmp_path / "o.pt")
    for lib in (torch, trainkit):
        got = lib.load(tmp_path / "o.pt", weights_only=False)
        assert got["info"] == RunInfo("run", 12) and got["text"] == "hello" and got["n"] == 2
        np.testing.assert_array_equal(got["array"], saved["array"])


def test_a_whole_trainkit_model_round_trips(torch, tmp_path):
    model = _model(trainkit)
    trainkit.save(model, tmp_path / "model.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch 2.13 warns about nothing here, not even weights_only=False
        again = trainkit.load(tmp_path / "model.pt", weights_only=False)
    assert type(again) is type(model) and again is not model
    x = trainkit.randn(4, 3)
    np.testing.assert_array_equal(to_numpy(again(x)), to_numpy(model(x)))
    assert isinstance(again[0].weight, trainkit.nn.Parameter) and again[0].weight.requires_grad


def test_a_whole_torch_model_loads_as_trainkits_where_trainkit_has_the_module(torch, tmp_path):
    pytest.importorskip("trainkit.nn.modules.linear")
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4))
    reference(torch.randn(6, 3))
    reference.eval()
    torch.save(reference, tmp_path / "model.pt")
    model = trainkit.load(tmp_path / "model.pt", weights_only=False)  # torch.nn.modules.* as trainkit.nn.modules.*
    assert isinstance(model, trainkit.nn.Sequential) and not model.training
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(
        to_numpy(model(trainkit.tensor(x))), to_numpy(reference(torch.tensor(x))), rtol=1e-6, atol=1e-6
    )


def test_a_torch_name_trainkit_lacks_fails_clearly(tmp_path):
    pkl = b"\x80\x02ctorch.no_such_module\nThing\n)\x81."
    with zipfile.ZipFile(tmp_path / "x.pt", "w") as archive:
        archive.writestr("archive/data.pkl", pkl)
    with pytest.raises(TorchFileError, match=r"x\.pt: .*torch's torch\.no_such_module\.Thing.*trainkit has no"):
        trainkit.load(tmp_path / "x.pt", weights_only=False)


# ---- weights_only ---------------------------------------------------------------------------------------------------


def test_refused_global_is_torchs_error(torch, tmp_path):
    trainkit.save({"info": RunInfo("a", 1)}, tmp_path / "ours.pt")
    torch.save({"info": RunInfo("a", 1)}, tmp_path / "theirs.pt")
    with pytest.raises(pickle.UnpicklingError) as expected:
        torch.load(tmp_path / "theirs.pt")
    for name in ("ours.pt", "theirs.pt"):
        with pytest.raises(UnsafeGlobalError) as got:
            trainkit.load(tmp_path / name)
        assert _unsupported_line(str(got.value)) == _unsupported_line(str(expected.value))
        assert str(got.value).startswith(f"{tmp_path / name}: Weights only load failed.")
    qualified = f"{RunInfo.__module__}.RunInfo"
    assert (
        f"Unsupported global: GLOBAL {qualified} was not an allowed global by default. Please use "
        f"`trainkit.serialization.add_safe_globals([{qualified}])` or the "
        f"`trainkit.serialization.safe_globals([{qualified}])` context manager" in str(got.value)
    )


def test_whole_model_needs_weights_only_false(torch, tmp_path):
    trainkit.save(_model(trainkit), tmp_path / "m.pt")
    with pytest.raises(UnsafeGlobalError, match="GLOBAL trainkit.layers"):
        trainkit.load(tmp_path / "m.pt")
    torch.save(_model(torch), tmp_path / "t.pt")
    with pytest.raises(UnsafeGlobalError) as got:
        trainkit.load(tmp_path / "t.pt")
    with pytest.raises(pickle.UnpicklingError) as expected:
        torch.load(tmp_path / "t.pt")
    assert _unsupported_line(str(got.value)) == _unsupported_line(str(expected.value))


def test_safe_globals_allow_a_class(torch, tmp_path):
    trainkit.save({"info": RunInfo("b", 2), "w": trainkit.ones(2)}, tmp_path / "r.pt")
    with safe_globals([RunInfo]):
        assert RunInfo in get_safe_globals()
        got = trainkit.load(tmp_path / "r.pt")
    with torch.serialization.safe_globals([RunInfo]):
        theirs = torch.load(tmp_path / "r.pt")
    assert got["info"] == theirs["info"] == RunInfo("b", 2)
    assert get_safe_globals() == []
    with pytest.raises(UnsafeGlobalError):
        trainkit.load(tmp_path / "r.pt")
    add_safe_globals([RunInfo])
    assert trainkit.load(tmp_path / "r.pt")["info"] == RunInfo("b", 2)
    clear_safe_globals()
    add_safe_globals([(RunInfo, f"{RunInfo.__module__}.RunInfo")])  # the (object, name) form
    assert trainkit.load(tmp_path / "r.pt")["info"].steps == 2


@pytest.mark.parametrize("writer", ["trainkit", "torch"])
def test_weights_only_never_runs_code(torch, tmp_path, writer):
    marker = tmp_path / "pwned"
    lib = trainkit if writer == "trainkit" else torch
    lib.save({"w": lib.ones(2), "payload": Evil(f"touch {marker}")}, tmp_path / "evil.pt")
    with pytest.raises(UnsafeGlobalError, match=r"GLOBAL (posix|os)\.system was not an allowed global"):
        trainkit.load(tmp_path / "evil.pt")
    assert not marker.exists()
    add_safe_globals([Evil])  # trusting the class does not trust the function its pickle calls
    with pytest.raises(UnsafeGlobalError):
        trainkit.load(tmp_path / "evil.pt")
    assert not marker.exists()


# ---- map_location and file objects ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["cpu", "device", "dict", "callable", "callable_none", "callable_cpu"],
)
def test_map_location_forms(torch, tmp_path, where):
    forms = {
        "cpu": "cpu",
        "device": trainkit.device("cpu"),
        "dict": {"cuda:0": "cpu"},
        "callable": lambda storage, location: storage,
        "callable_none": lambda storage, location: None,
        "callable_cpu": lambda storage, location: storage.cpu(),
    }
    torch.save({"w": torch.arange(4.0)}, tmp_path / "t.pt")
    torch_form = forms[where] if where != "device" else torch.device("cpu")
    expected = torch.load(tmp_path / "t.pt", map_location=torch_form)
    got = trainkit.load(tmp_path / "t.pt", map_location=forms[where])
    assert got["w"].device == trainkit.device("cpu")
    np.testing.assert_array_equal(to_numpy(got["w"]), to_numpy(expected["w"]))


def test_map_location_of_the_wrong_kind(tmp_path):
    trainkit.save({"w": trainkit.ones(1)}, tmp_path / "t.pt")
    with pytest.raises(TypeError, match="map_location must be a device, a string"):
        trainkit.load(tmp_path / "t.pt", map_location=1.5)
    with pytest.raises(TorchFileError, match="map_location returned a str"):
        trainkit.load(tmp_path / "t.pt", map_location=lambda storage, location: "cpu")


def test_file_objects_both_ways(torch):
    buffer = io.BytesIO()
    trainkit.save({"w": trainkit.ones(2, 3), "step": 4}, buffer)
    assert zipfile.ZipFile(io.BytesIO(buffer.getvalue())).namelist()[0] == "archive/data.pkl"  # torch's zip
    buffer.seek(0)
    theirs = torch.load(buffer)
    assert theirs["step"] == 4 and tuple(theirs["w"].shape) == (2, 3)
    other = io.BytesIO()
    torch.save({"w": torch.full((2,), 5.0), "p": torch.nn.Parameter(torch.ones(1))}, other)
    other.seek(0)
    ours = trainkit.load(other)
    np.testing.assert_array_equal(to_numpy(ours["w"]), [5.0, 5.0])
    assert isinstance(ours["p"], trainkit.nn.Parameter) and ours["p"].requires_grad
    model = _model(trainkit)
    whole = io.BytesIO()
    trainkit.save(model, whole)
    whole.seek(0)
    x = trainkit.randn(2, 3)
    np.testing.assert_array_equal(to_numpy(trainkit.load(whole, weights_only=False)(x)), to_numpy(model(x)))


def test_npz_and_other_names_keep_trainkits_archive(tmp_path):
    trainkit.save({"w": trainkit.ones(2)}, tmp_path / "w.npz")
    moved = trainkit.load(tmp_path / "w.npz", map_location=lambda storage, location: storage.cpu())
    assert moved["w"].device == trainkit.device("cpu")
    assert "__meta__.npy" in zipfile.ZipFile(tmp_path / "w.npz").namelist()
    with pytest.raises(TypeError, match=re.escape("choose a .pt name")):
        trainkit.save(_model(trainkit), tmp_path / "m.npz")
    assert trainkit.load(tmp_path / "w.npz", weights_only=False)["w"].shape == (2,)


def test_unsafe_globals_in_checkpoint_as_torch_lists_them(torch, tmp_path):
    torch.save({"model": torch.nn.Linear(2, 2), "info": RunInfo("c", 3), "w": torch.ones(1)}, tmp_path / "u.pt")
    expected = set(torch.serialization.get_unsafe_globals_in_checkpoint(tmp_path / "u.pt"))
    assert set(get_unsafe_globals_in_checkpoint(tmp_path / "u.pt")) == expected
    add_safe_globals([RunInfo])
    assert f"{RunInfo.__module__}.RunInfo" not in get_unsafe_globals_in_checkpoint(tmp_path / "u.pt")
    trainkit.save({"w": trainkit.ones(1)}, tmp_path / "ok.pt")
    assert get_unsafe_globals_in_checkpoint(tmp_path / "ok.pt") == []


def test_requires_grad_as_torch_saves_it(torch):
    def saved(lib):
        leaf = lib.ones(2, requires_grad=True)
        buffer = io.BytesIO()
        lib.save({"leaf": leaf, "derived": leaf * 2, "plain": lib.ones(1)}, buffer)
        buffer.seek(0)
        return {k: (v.requires_grad, v.is_leaf) for k, v in torch.load(buffer).items()}

    assert saved(trainkit) == saved(torch)


def test_what_pickle_cannot_save_is_refused_as_torch_refuses_it(torch, tmp_path):
    for obj in ({"f": lambda x: x}, {"lock": threading.Lock()}):
        with pytest.raises((pickle.PicklingError, TypeError, AttributeError)) as got:
            trainkit.save(obj, tmp_path / "x.pt")
        with pytest.raises((pickle.PicklingError, TypeError, AttributeError)) as expected:
            torch.save(obj, io.BytesIO())
        assert type(got.value) is type(expected.value), (got.value, expected.value)
        assert list(tmp_path.iterdir()) == []  # no file, nor a temporary one, is left behind


def test_views_of_one_tensor_share_one_storage_as_in_torch(torch):
    def saved(lib):
        base = lib.arange(12.0).reshape(3, 4)
        buffer = io.BytesIO()
        lib.save({"base": base, "rows": base[1:], "t": base.T, "one": base[1, 2], "empty": lib.zeros(0)}, buffer)
        return buffer

    ours, theirs = saved(trainkit), saved(torch)
    for buffer in (ours, theirs):
        names = zipfile.ZipFile(buffer).namelist()
        assert sum(name.startswith("archive/data/") for name in names) == 2  # base (and its views), empty
    ours.seek(0), theirs.seek(0)
    got, expected = torch.load(ours), torch.load(theirs)
    for key in expected:
        assert (
            got[key].stride() == expected[key].stride() and got[key].storage_offset() == expected[key].storage_offset()
        )
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())
    ours.seek(0)
    back = trainkit.load(ours)
    assert np.shares_memory(back["base"].numpy(), back["t"].numpy())


def test_large_inline_objects_load_from_a_trusted_file(tmp_path):
    trainkit.save({"a": np.zeros(9_000_000)}, tmp_path / "big.pt")  # 72 MB of pickle, past the structure limit
    assert trainkit.load(tmp_path / "big.pt", weights_only=False)["a"].shape == (9_000_000,)
    with pytest.raises(TorchFileError, match="big.pt: archive/data.pkl is .* bytes.*weights_only=False"):
        trainkit.load(tmp_path / "big.pt")


def test_a_whole_model_loads_with_its_classes_allowlisted(tmp_path):
    """A Module's hook tables are plain dicts (where torch pickles OrderedDicts): allowlisting the model's own
    classes is enough, as with torch."""
    from trainkit.serialization import UnsafeGlobalError, safe_globals

    model = trainkit.nn.Sequential(trainkit.nn.Linear(2, 3), trainkit.nn.ReLU())
    trainkit.save(model, tmp_path / "m.pt")
    with pytest.raises(UnsafeGlobalError, match="Sequential"):
        trainkit.load(tmp_path / "m.pt")
    with safe_globals([trainkit.nn.Sequential, trainkit.nn.Linear, trainkit.nn.ReLU]):
        loaded = trainkit.load(tmp_path / "m.pt")
    x = trainkit.ones(4, 2)
    assert trainkit.equal(loaded(x), model(x))
