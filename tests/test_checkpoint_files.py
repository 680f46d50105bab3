"""Broken and hostile files given to trainkit.load (and so to checkpoints and --resume): every error names the file
and says what is wrong, nothing suggests unsafe loading, only numeric and bool arrays become tensors, and a member
that would inflate far beyond its size is refused before it is read."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit.serialization import FileFormatError, load, save

ROOT = Path(__file__).resolve().parents[1]


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _archive(path: Path, members: dict, compress: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _meta(doc) -> bytes:
    return _npy(np.array(json.dumps(doc)))


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.npz"
    save({"w": trainkit.ones(2, 3), "epoch": 3}, path)
    return path


def test_a_good_file_loads(good):
    state = load(good)
    assert state["epoch"] == 3 and tuple(state["w"].shape) == (2, 3)
    assert state["w"].numpy().flags.writeable


@pytest.mark.parametrize(
    "make,words",
    [
        (lambda p, g: p.write_bytes(b"not a zip at all"), "not a readable archive"),
        (lambda p, g: p.write_bytes(g.read_bytes()[: len(g.read_bytes()) // 2]), "not a readable archive"),
        (lambda p, g: _archive(p, {"a0.npy": _npy(np.ones(2))}), "has no __meta__ entry"),
        (lambda p, g: _archive(p, {"__meta__.npy": _npy(np.array("{not json"))}), "not valid JSON"),
        (lambda p, g: _archive(p, {"__meta__.npy": _npy(np.array("[" * 100000 + "]" * 100000))}), "nested too deeply"),
        (lambda p, g: _archive(p, {"__meta__.npy": _meta({"s:w": {"__tensor__": 99}})}), "names array 'a99'"),
        (
            lambda p, g: _archive(
                p,
                {"__meta__.npy": _meta({"s:w": {"__tensor__": 0}}), "a0.npy": _npy(np.array([object()], dtype=object))},
            ),
            "holds object data",
        ),
        (
            lambda p, g: _archive(
                p, {"__meta__.npy": _meta({"s:w": {"__tensor__": 0}}), "a0.npy": _npy(np.ones(3, np.complex64))}
            ),
            "holds complex64 data",
        ),
        (
            lambda p, g: _archive(
                p, {"__meta__.npy": _meta({"s:w": {"__tensor__": 0}}), "a0.npy": _npy(np.array(["a", "b"]))}
            ),
            "only numeric and bool arrays",
        ),
        (
            lambda p, g: _archive(
                p, {"__meta__.npy": _meta({"s:w": {"__tensor__": 0}}), "a0.npy": _npy(np.ones(8))[:-16]}
            ),
            "declares (8,) float64",
        ),
    ],
)
def test_a_broken_file_names_itself_and_the_trouble(tmp_path, good, make, words):
    path = tmp_path / "broken.npz"
    make(path, good)
    with pytest.raises(FileFormatError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and words in message
    assert "allow_pickle" not in message and "pickle" not in message.replace("unpickl", "")


def test_a_member_that_would_inflate_enormously_is_refused_unread(tmp_path):
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float64))
    header["shape"] = (64 << 20,)  # 512 MB of zeros, a few hundred KB compressed
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    member = buffer.getvalue() + bytes(512 << 20)
    path = _archive(
        tmp_path / "bomb.npz", {"__meta__.npy": _meta({"s:w": {"__tensor__": 0}}), "a0.npy": member}, compress=True
    )
    assert path.stat().st_size < 4 << 20
    with pytest.raises(FileFormatError, match="would inflate from [0-9]+ to 536871040 bytes"):
        load(path)


def test_resume_from_a_broken_checkpoint_names_it(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainkit",
            "train",
            ROOT / "configs" / "regression.yaml",
            "--set",
            "trainer.epochs=1",
            "--set",
            "callbacks=[]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    last = tmp_path / "runs" / "regression" / "version_0" / "checkpoints" / "last.npz"
    last.write_bytes(last.read_bytes()[:100])
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainkit",
            "train",
            ROOT / "configs" / "regression.yaml",
            "--resume",
            last,
            "--set",
            "trainer.epochs=2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 2  # a file the user named: exit 2, one line
    assert resumed.stderr.strip().startswith(f"trainkit: error: {last}: not a file written by trainkit.save")
    assert "Traceback" not in resumed.stderr


def test_a_checkpoint_of_another_model_is_refused_before_its_data_is_read(tmp_path, monkeypatch):
    from trainkit.serialization import save_load as serialization
    from trainkit.trainer import Trainer

    Trainer(trainkit.nn.Linear(1, 10), verbose=False).save_checkpoint(tmp_path / "ten.npz")
    reads = []
    original = serialization._read_member

    def counting(archive, info, where, kinds, data=True):
        if data:
            reads.append(info.filename)
        return original(archive, info, where, kinds, data)

    monkeypatch.setattr(serialization, "_read_member", counting)
    with pytest.raises(
        FileFormatError,
        match=r"model\.weight has shape \(10, 1\) in the file but \(20, 1\) in the "
        r"model; nothing was loaded",
    ):
        Trainer(trainkit.nn.Linear(1, 20), verbose=False).load_checkpoint(tmp_path / "ten.npz")
    assert reads == ["__meta__.npy"]  # the structure document only: no array data was read
