"""safetensors both ways: weights PyTorch saved with safetensors load into the same trainkit model and give the same
outputs, and trainkit's saved .safetensors load into PyTorch; bad files and objects say what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

import trainkit
from trainkit.serialization import FileFormatError

safetensors_torch = pytest.importorskip("safetensors.torch")
torch = pytest.importorskip("torch")


def _pair():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    ours = trainkit.nn.Sequential(trainkit.nn.Linear(3, 5), trainkit.nn.ReLU(), trainkit.nn.Linear(5, 2))
    return theirs, ours


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def test_weights_from_pytorch_give_the_same_outputs(tmp_path):
    theirs, ours = _pair()
    safetensors_torch.save_file(theirs.state_dict(), str(tmp_path / "w.safetensors"))
    ours.load_state_dict(trainkit.load(tmp_path / "w.safetensors"))
    difference = np.abs(ours(trainkit.tensor(X)).detach().numpy() - theirs(torch.tensor(X)).detach().numpy()).max()
    assert difference < 1e-6


def test_weights_from_trainkit_load_into_pytorch(tmp_path):
    theirs, ours = _pair()
    trainkit.save(ours.state_dict(), tmp_path / "w.safetensors")
    theirs.load_state_dict(safetensors_torch.load_file(str(tmp_path / "w.safetensors")))
    difference = np.abs(ours(trainkit.tensor(X)).detach().numpy() - theirs(torch.tensor(X)).detach().numpy()).max()
    assert difference < 1e-6
    bn = trainkit.nn.BatchNorm1d(3)
    trainkit.save(bn.state_dict(), tmp_path / "bn.safetensors")  # a 0-d int64 counter too
    assert trainkit.load(tmp_path / "bn.safetensors")["num_batches_tracked"].dtype == trainkit.int64


def test_what_safetensors_cannot_hold_and_broken_files(tmp_path):
    with pytest.raises(TypeError, match="flat dict of names to tensors"):
        trainkit.save({"model": {"w": trainkit.ones(2)}}, tmp_path / "x.safetensors")
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(FileFormatError, match=f"{broken}: not a readable safetensors file"):
        trainkit.load(broken)


def test_model_checkpoint_writes_safetensors_weights_pytorch_loads(tmp_path):
    from trainkit.callbacks import ModelCheckpoint
    from trainkit.trainer import Trainer

    theirs, ours = _pair()
    x = trainkit.linspace(-1, 1, 24).reshape(8, 3)
    trainer = Trainer(
        ours,
        loss="mse",
        callbacks=[ModelCheckpoint(tmp_path, monitor="loss", weights_format="safetensors")],
        verbose=False,
    )
    trainer.fit(x, trainkit.zeros(8, 2), epochs=2, batch_size=4)
    theirs.load_state_dict(safetensors_torch.load_file(str(tmp_path / "last.safetensors")))
    assert (tmp_path / "best.safetensors").is_file()
    difference = np.abs(ours(trainkit.tensor(X)).detach().numpy() - theirs(torch.tensor(X)).detach().numpy()).max()
    assert difference < 1e-6


def test_bfloat16_weights_load_as_bfloat16(tmp_path):
    theirs, ours = _pair()
    safetensors_torch.save_file(theirs.to(torch.bfloat16).state_dict(), str(tmp_path / "bf16.safetensors"))
    state = trainkit.load(tmp_path / "bf16.safetensors")
    for name, value in theirs.state_dict().items():
        assert state[name].dtype == trainkit.bfloat16
        np.testing.assert_array_equal(state[name].float().numpy(), value.float().numpy())
    ours.load_state_dict(state)  # a bfloat16 model's weights, run in float32 (copied into the float32 parameters)
    assert ours.state_dict()[name].dtype == trainkit.float32


def _file(header: dict, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x01\x02", "shorter than its 8-byte header length"),
        ((10**15).to_bytes(8, "little") + b"{}", "its header claims 1000000000000000 bytes"),
        (_file({"w": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4]}}, b"\0" * 4), "needs 4000000"),
        (_file({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4), r"\[0, 8\] give 8 of the 4"),
        (_file({"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\0"), "holds F8_E4M3 data"),
        (_file({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}), "is not a list of sizes"),
        (_file({"w": {"dtype": "F32"}}), "needs dtype, shape and data_offsets"),
        (_file([1, 2]), "its header is not a JSON object"),  # type: ignore[arg-type]
        (b"\x04\0\0\0\0\0\0\0\xff\xfe{}", "header:"),
    ],
)
def test_hostile_headers_are_refused_before_any_data_is_read(tmp_path, content, message):
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(content)
    with pytest.raises(FileFormatError, match=message) as err:
        trainkit.load(path)
    assert str(path) in str(err.value)
