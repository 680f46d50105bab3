"""PyTorch's .pt / .pth files read by ``trainkit.serialization.load_torch_file``, without torch and without running
code: torch 2 writes the files, the values must come back exactly and give the same outputs in trainkit models;
files naming anything but tensors and plain containers, legacy files and damaged files are refused by name."""

from __future__ import annotations

import os
import pickle
import struct
import sys
import warnings
import zipfile

import numpy as np
import pytest
from conftest import doc_blocks

import trainkit
from trainkit import nn
from trainkit.serialization.torch_pickle import TorchFileError, UnsafeGlobalError, load_torch_file


def _np(t) -> np.ndarray:
    return t.detach().numpy()


def _same(loaded, reference) -> None:
    """Equal values, dtype and shape, exactly."""
    assert isinstance(loaded, trainkit.Tensor), type(loaded)
    assert str(loaded.dtype).split(".")[-1] == str(reference.dtype).split(".")[-1]
    assert tuple(loaded.shape) == tuple(reference.shape)
    np.testing.assert_array_equal(_np(loaded), _np(reference))


def _rezip(src, dst, replace: dict | None = None, drop: tuple = ()) -> None:
    """Copy a torch zip archive, replacing or dropping members (named without the record folder)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            member = info.filename.split("/", 1)[1]
            if member in drop:
                continue
            zout.writestr(info.filename, (replace or {}).get(member, zin.read(info.filename)))


def _archive(path, pkl: bytes, storages: dict | None = None) -> None:
    """A zip archive laid out as torch.save's, with a hand-written pickle."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        for key, raw in (storages or {}).items():
            z.writestr(f"archive/data/{key}", raw)


def _s(text: str) -> bytes:
    """Pickle's BINUNICODE opcode."""
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _tensor_pickle(numel: int, offset: int, size: tuple, stride: tuple) -> bytes:
    """Protocol 2 pickle of one float tensor on storage '0', written the way torch.save writes it."""
    ints = b"".join(b"K" + bytes([n]) for n in size)
    strides = b"".join(b"K" + bytes([n]) for n in stride)
    return (
        b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n("
        + b"("
        + _s("storage")
        + b"ctorch\nFloatStorage\n"
        + _s("0")
        + _s("cpu")
        + b"K"
        + bytes([numel])
        + b"tQ"
        + b"K"
        + bytes([offset])
        + b"("
        + ints
        + b"t("
        + strides
        + b"t\x89ccollections\nOrderedDict\n)Rt"
        + b"R."
    )


# ---- values exactly as torch saved them ---------------------------------------------------------------------------


def test_state_dict_values_dtypes_and_metadata(torch, tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    model(torch.randn(5, 4))  # running statistics and num_batches_tracked move away from their defaults
    sd = model.state_dict()
    torch.save(sd, tmp_path / "m.pt")
    loaded = load_torch_file(tmp_path / "m.pt")
    assert list(loaded) == list(sd)
    for key in sd:
        _same(loaded[key], sd[key])
        assert not loaded[key].requires_grad
    assert loaded["1.num_batches_tracked"].dtype == trainkit.int64 and loaded["1.num_batches_tracked"].item() == 1
    assert loaded._metadata == sd._metadata  # the per-module versions torch's load_state_dict reads


def test_views_sharing_one_storage(torch, tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {
        "base": base,
        "cols": base[:, 1:4],
        "t": base.t(),
        "row": base[2],
        "step": base[::2, ::3],
        "elem": base[3, 5],
        "flat_tail": base.view(-1)[7:19],
    }
    torch.save(views, tmp_path / "v.pth")
    loaded = load_torch_file(tmp_path / "v.pth")
    for key, ref in views.items():
        _same(loaded[key], ref)
    # one storage in the file, one array here: a write shows through every view, as in torch
    arrays = [t.numpy() for t in loaded.values()]
    assert all(np.shares_memory(arrays[0], a) for a in arrays[1:])
    loaded["row"][0] = -1.0
    assert loaded["base"][2, 0].item() == -1.0 and loaded["t"][0, 2].item() == -1.0


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"])
def test_dtypes(torch, tmp_path, dtype):
    ref = (torch.arange(-3, 9).reshape(3, 4) * 1.25).to(getattr(torch, dtype))
    torch.save({"x": ref, "x_t": ref.t()}, tmp_path / "d.pt")
    loaded = load_torch_file(tmp_path / "d.pt")
    _same(loaded["x"], ref)
    _same(loaded["x_t"], ref.t())


def test_bfloat16_stays_bfloat16_both_ways(torch, tmp_path):
    ref = torch.randn(3, 5).to(torch.bfloat16)
    torch.save({"w": ref}, tmp_path / "bf.pt")
    loaded = load_torch_file(tmp_path / "bf.pt")
    assert loaded["w"].dtype == trainkit.bfloat16
    np.testing.assert_array_equal(_np(loaded["w"].float()), ref.float().numpy())
    trainkit.save(loaded, tmp_path / "back.pt")
    again = torch.load(tmp_path / "back.pt")
    assert again["w"].dtype == torch.bfloat16 and torch.equal(again["w"], ref)


def test_checkpoint_dict_with_primitives(torch, tmp_path):
    sd = torch.nn.Linear(3, 2).state_dict()
    checkpoint = {
        "model": sd,
        "epoch": 3,
        "lr": 0.125,
        "name": "run",
        "tags": ["a", "b"],
        "shape": (2, 3),
        "size": torch.Size([2, 3]),
        "raw": b"\x00\xffbytes",
        "seen": {1, 2},
        "none": None,
        "ok": True,
        "nested": {"deep": {"t": torch.ones(2)}},
        "dtype": torch.float16,
        "device": torch.device("cpu"),
    }
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    loaded = load_torch_file(tmp_path / "ckpt.pt")
    for key in ("epoch", "lr", "name", "tags", "shape", "raw", "seen", "none", "ok"):
        assert loaded[key] == checkpoint[key], key
    assert tuple(loaded["size"]) == (2, 3)
    assert loaded["dtype"] == trainkit.float16 and loaded["device"] == "cpu"
    _same(loaded["nested"]["deep"]["t"], torch.ones(2))
    for key in sd:
        _same(loaded["model"][key], sd[key])


def test_parameters_keep_their_class_and_requires_grad(torch, tmp_path):
    model = torch.nn.Linear(3, 2)
    model.bias.requires_grad_(False)
    torch.save(model.state_dict(keep_vars=True), tmp_path / "p.pt")
    loaded = load_torch_file(tmp_path / "p.pt")
    assert isinstance(loaded["weight"], nn.Parameter) and loaded["weight"].requires_grad
    assert isinstance(loaded["bias"], nn.Parameter) and not loaded["bias"].requires_grad
    _same(loaded["weight"], model.weight)


def test_tensor_saved_with_requires_grad(torch, tmp_path):
    torch.save({"leaf": torch.ones(2, requires_grad=True)}, tmp_path / "g.pt")
    assert load_torch_file(tmp_path / "g.pt")["leaf"].requires_grad


def test_big_endian_byteorder_record(torch, tmp_path):
    ref = torch.arange(6, dtype=torch.float64) / 7
    torch.save({"x": ref}, tmp_path / "le.pt")
    with zipfile.ZipFile(tmp_path / "le.pt") as z:
        raw = z.read("le/data/0")
    swapped = np.frombuffer(raw, "<f8").astype(">f8").tobytes()
    _rezip(tmp_path / "le.pt", tmp_path / "be.pt", {"byteorder": b"big", "data/0": swapped})
    _same(load_torch_file(tmp_path / "be.pt")["x"], ref)


# ---- the same outputs in trainkit models ---------------------------------------------------------------------------


def test_mlp_weights_give_torch_outputs(torch, tmp_path):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    torch.save(ref.state_dict(), tmp_path / "mlp.pt")
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    model.load_state_dict(load_torch_file(tmp_path / "mlp.pt"))
    x = np.random.default_rng(0).standard_normal((16, 10)).astype(np.float32)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    got = _np(model(trainkit.from_numpy(x)))
    assert np.abs(got - expected).max() < 1e-6


def test_conv_batchnorm_weights_give_torch_outputs(torch, tmp_path):
    torch.manual_seed(0)

    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(3, 8, 3, padding=1),
            lib.nn.BatchNorm2d(8),
            lib.nn.ReLU(),
            lib.nn.Conv2d(8, 4, 3, stride=2),
            lib.nn.BatchNorm2d(4),
            lib.nn.Flatten(),
            lib.nn.Linear(4 * 3 * 3, 5),
        )

    ref = build(torch)
    ref.train()
    for _ in range(3):  # running statistics and counters that differ from a fresh model's
        ref(torch.randn(8, 3, 8, 8) * 2 + 1)
    ref.eval()
    torch.save({"model": ref.state_dict(), "epoch": 3}, tmp_path / "cnn.pth")
    checkpoint = load_torch_file(tmp_path / "cnn.pth")
    assert checkpoint["epoch"] == 3
    model = build(trainkit)
    model.load_state_dict(checkpoint["model"])
    model.eval()
    assert model[1].num_batches_tracked.item() == 3
    x = np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    got = _np(model(trainkit.from_numpy(x)))
    assert np.abs(got - expected).max() < 1e-6


# ---- refused: code, legacy files, damaged files --------------------------------------------------------------------


class _Evil:
    """Pickles as a call to os.system: what a malicious checkpoint does to torch.load(weights_only=False)."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_malicious_pickle_is_refused_and_nothing_runs(torch, tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"weight": torch.ones(2), "payload": _Evil(f"touch {marker}")}, tmp_path / "evil.pt")
    with pytest.raises(UnsafeGlobalError) as caught:
        load_torch_file(tmp_path / "evil.pt")
    assert not marker.exists()
    message = str(caught.value)
    assert "evil.pt" in message and ("posix.system" in message or "os.system" in message)
    assert isinstance(caught.value, pickle.UnpicklingError)


@pytest.mark.parametrize(
    "module,name",
    [
        ("builtins", "eval"),
        ("torch", "load"),
        ("torch._utils", "_rebuild_qtensor"),
        ("numpy", "frombuffer"),
        ("trainkit_never_imported", "boom"),
    ],
)
def test_other_globals_are_refused_without_import(tmp_path, module, name):
    _archive(tmp_path / "g.pt", b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")R.")
    with pytest.raises(UnsafeGlobalError, match=f"g.pt.*'{module}.{name}'"):
        load_torch_file(tmp_path / "g.pt")
    assert "trainkit_never_imported" not in sys.modules


def test_layout_past_the_storage_is_refused(tmp_path):
    storage = {"0": np.arange(4, dtype="<f4").tobytes()}
    _archive(tmp_path / "ok.pt", _tensor_pickle(4, 1, (3,), (1,)), storage)
    np.testing.assert_array_equal(_np(load_torch_file(tmp_path / "ok.pt")), [1, 2, 3])
    _archive(tmp_path / "oob.pt", _tensor_pickle(4, 2, (3,), (1,)), storage)
    with pytest.raises(TorchFileError, match="oob.pt.*reaches past the 4 elements"):
        load_torch_file(tmp_path / "oob.pt")


def test_storage_of_the_wrong_length(tmp_path):
    _archive(tmp_path / "short.pt", _tensor_pickle(4, 0, (4,), (1,)), {"0": b"\x00" * 12})
    with pytest.raises(TorchFileError, match="short.pt.*12 bytes; 4 elements of FloatStorage need 16"):
        load_torch_file(tmp_path / "short.pt")


def test_missing_storage_record(torch, tmp_path):
    torch.save({"x": torch.ones(3)}, tmp_path / "full.pt")
    _rezip(tmp_path / "full.pt", tmp_path / "gap.pt", drop=("data/0",))
    with pytest.raises(TorchFileError, match=r"gap.pt: the archive has no full/data/0"):
        load_torch_file(tmp_path / "gap.pt")


def test_legacy_format_asks_to_resave(torch, tmp_path):
    torch.save({"x": torch.ones(3)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(TorchFileError, match=r"old.pt is in PyTorch's legacy format.*re-save it with a current torch"):
        load_torch_file(tmp_path / "old.pt")


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_file_names_the_file(torch, tmp_path, keep):
    torch.save(torch.nn.Linear(20, 20).state_dict(), tmp_path / "full.pt")
    raw = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(TorchFileError, match="cut.pt"):
        load_torch_file(tmp_path / "cut.pt")


def test_corrupt_bytes_inside_the_archive(torch, tmp_path):
    torch.save({"x": torch.arange(64, dtype=torch.float32)}, tmp_path / "full.pt")
    raw = bytearray((tmp_path / "full.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "full.pt") as z:
        info = z.getinfo("full/data/0")
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26 : info.header_offset + 30])
    raw[info.header_offset + 30 + name_len + extra_len + 10] ^= 0xFF  # a byte of the data, past the local header
    (tmp_path / "bad.pt").write_bytes(bytes(raw))
    with pytest.raises(TorchFileError, match="bad.pt.*full/data/0"):
        load_torch_file(tmp_path / "bad.pt")


def test_garbage_pickle_inside_a_valid_archive(tmp_path):
    _archive(tmp_path / "junk.pt", b"\x80\x02}q\x00(X")
    with pytest.raises(TorchFileError, match="junk.pt: cannot unpickle archive/data.pkl"):
        load_torch_file(tmp_path / "junk.pt")


def test_not_a_torch_file(tmp_path):
    (tmp_path / "notes.pt").write_text("hello")
    with pytest.raises(TorchFileError, match="notes.pt is not a PyTorch file"):
        load_torch_file(tmp_path / "notes.pt")
    with zipfile.ZipFile(tmp_path / "other.pt", "w") as z:
        z.writestr("readme.txt", "a zip, but not torch's")
    with pytest.raises(TorchFileError, match="other.pt: expected one <name>/data.pkl"):
        load_torch_file(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_torch_file(tmp_path / "missing.pt")


def test_torchscript_archive_is_refused(torch, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, its files are still about
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tmp_path / "scripted.pt")
    with pytest.raises(TorchFileError, match="scripted.pt is a TorchScript archive"):
        load_torch_file(tmp_path / "scripted.pt")


def test_docs_example_runs(torch, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = doc_blocks("Loading PyTorch weights")
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/ecosystem.md", "exec"), namespace)
    assert capsys.readouterr().out == "3 (2, 3)\n"


def test_build_cannot_rewrite_shared_objects(tmp_path):
    """Pickle's BUILD sets attributes on any object: never on the allowed globals, nor over a class's own."""
    counter_update, name = __import__("collections").Counter.update, trainkit.float32.name
    attempts = {
        "counter": b"\x80\x02ccollections\nCounter\nN}" + _s("update") + b"Ns\x86b.",
        "dtype": b"\x80\x02ctorch\nfloat32\nN}" + _s("name") + _s("hacked") + b"s\x86b.",
        "device": b"\x80\x02ctorch\ndevice\n}" + _s("__init__") + b"Nsb.",
        "state_dict_method": b"\x80\x02ccollections\nOrderedDict\n)R}" + _s("items") + b"Nsb.",
        "tensor_private": _tensor_pickle(4, 0, (4,), (1,))[:-1] + b"}" + _s("_data") + b"Nsb.",
    }
    for label, pkl in attempts.items():
        _archive(tmp_path / f"{label}.pt", pkl, {"0": bytes(16)})
        with pytest.raises(UnsafeGlobalError, match=f"{label}.pt: (refusing to set the state|attribute)"):
            load_torch_file(tmp_path / f"{label}.pt")
    assert __import__("collections").Counter.update is counter_update and trainkit.float32.name == name
    _archive(tmp_path / "meta.pt", b"\x80\x02ccollections\nOrderedDict\n)R}" + _s("_metadata") + b"K\x01sb.")
    assert load_torch_file(tmp_path / "meta.pt")._metadata == 1


def test_trainkit_load_reads_a_state_dict_torch_saved(tmp_path):
    import torch

    import trainkit

    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    path = tmp_path / "weights.pt"
    torch.save(reference.state_dict(), path)
    model = trainkit.nn.Sequential(trainkit.nn.Linear(3, 4), trainkit.nn.ReLU(), trainkit.nn.Linear(4, 2))
    model.load_state_dict(trainkit.load(path))
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    expected = reference(torch.tensor(x)).detach().numpy()
    assert np.abs(model(trainkit.tensor(x)).detach().numpy() - expected).max() < 1e-6
    trainkit.save(model.state_dict(), tmp_path / "ours.pt")  # a .pt that trainkit wrote still loads as ours
    assert set(trainkit.load(tmp_path / "ours.pt")) == set(model.state_dict())


def test_trainkit_save_to_pt_writes_what_torch_load_reads(tmp_path):
    import torch

    import trainkit

    model = trainkit.nn.Sequential(trainkit.nn.Linear(3, 4), trainkit.nn.BatchNorm1d(4), trainkit.nn.Linear(4, 2))
    model(trainkit.randn(5, 3))  # BatchNorm's running statistics and counter move off their defaults
    path = tmp_path / "model.pt"
    trainkit.save(
        {
            "model": model.state_dict(),
            "epoch": 7,
            "lr": 1e-3,
            "names": ["a", ("b", None)],
            "p": trainkit.nn.Parameter(trainkit.ones(2)),
            "n": np.float32(0.5),
        },
        path,
    )
    loaded = torch.load(path, weights_only=True)  # PyTorch itself, in its safe mode
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    reference.load_state_dict(loaded["model"])
    for key, value in model.state_dict().items():
        assert tuple(loaded["model"][key].shape) == tuple(value.shape)
        assert np.array_equal(loaded["model"][key].detach().numpy(), value.detach().numpy())
    assert (loaded["epoch"], loaded["lr"], loaded["names"], loaded["n"]) == (7, 1e-3, ["a", ("b", None)], 0.5)
    assert isinstance(loaded["p"], torch.nn.Parameter) and loaded["p"].requires_grad
    model.eval(), reference.eval()
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    ours, theirs = model(trainkit.tensor(x)).detach().numpy(), reference(torch.tensor(x)).detach().numpy()
    assert np.abs(ours - theirs).max() < 1e-6
    again = trainkit.load(path)  # and trainkit reads its own .pt file back
    assert again["epoch"] == 7 and np.array_equal(again["model"]["0.weight"].numpy(), model[0].weight.detach().numpy())


def test_a_pt_file_holds_numpy_arrays_for_trusted_loads(torch, tmp_path):
    import trainkit

    trainkit.save({"a": np.ones(2)}, tmp_path / "x.pt")  # pickled as torch.save pickles it
    np.testing.assert_array_equal(torch.load(tmp_path / "x.pt", weights_only=False)["a"], np.ones(2))
    np.testing.assert_array_equal(trainkit.load(tmp_path / "x.pt", weights_only=False)["a"], np.ones(2))
    with pytest.raises(UnsafeGlobalError, match=r"x\.pt.*'numpy\._core\.multiarray\._reconstruct'"):
        trainkit.load(tmp_path / "x.pt")  # refused by default, as torch.load(weights_only=True) refuses it
