"""Small files that ask for a lot: each is refused, naming the file, from what its headers declare, before the
memory is allocated or the data inflated (peak memory is measured in a child process where memory is the point)."""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit.datasets.idx import IDXFormatError, read_idx
from trainkit.serialization import TorchFileError


def _pt(path: Path, pickled: bytes, members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> Path:
    """A file laid out as torch.save lays it out: NAME/data.pkl, NAME/byteorder, NAME/data/KEY."""
    with zipfile.ZipFile(path, "w", compression) as z:
        z.writestr("m/data.pkl", pickled)
        z.writestr("m/byteorder", "little")
        for key, data in members.items():
            z.writestr(f"m/data/{key}", data)
    return path


def _peak_mb(code: str) -> tuple[float, str]:
    """Run ``code`` in a fresh interpreter; (its peak resident memory above the import of trainkit in MB, stderr)."""
    program = (
        "import resource, sys, trainkit\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except Exception as err:\n"
        "    print(type(err).__name__, err, file=sys.stderr)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    return float(result.stdout.strip().splitlines()[-1]), result.stderr


def test_a_bytearray_of_a_number_is_refused(tmp_path):
    class Bomb:
        def __reduce__(self):
            return bytearray, (4_000_000_000,)

    path = _pt(tmp_path / "bomb.pt", pickle.dumps({"x": Bomb()}, protocol=2), {})
    assert path.stat().st_size < 1000
    peak, err = _peak_mb(f"trainkit.load({str(path)!r})")
    assert "TorchFileError" in err and "bytearray(int)" in err and str(path) in err
    assert peak < 200


def test_bytearrays_as_pickle_writes_them_still_load(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "ok.pt"
    torch.save({"blob": bytearray(b"abc"), "w": torch.ones(2)}, path)
    loaded = trainkit.load(path)
    assert loaded["blob"] == bytearray(b"abc") and loaded["w"].tolist() == [1.0, 1.0]


def test_a_member_that_would_inflate_far_is_refused_from_its_header(tmp_path):
    torch = pytest.importorskip("torch")
    plain = tmp_path / "plain.pt"
    torch.save({"w": torch.zeros(64 << 20, dtype=torch.uint8)}, plain)  # 64 MB of zeros
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    assert bomb.stat().st_size < 1 << 20
    peak, err = _peak_mb(f"trainkit.load({str(bomb)!r})")
    assert "would inflate from" in err and str(bomb) in err
    assert peak < 40


def test_a_storage_larger_than_the_pickle_says_is_refused_before_it_is_read(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    path = tmp_path / "w.pt"
    torch.save({"w": torch.ones(4)}, path)
    grown = tmp_path / "grown.pt"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(grown, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(info.filename, data + bytes(1 << 20) if "/data/" in info.filename else data)
    reads = []
    original = zipfile.ZipFile.read
    monkeypatch.setattr(
        zipfile.ZipFile, "read", lambda self, name, pwd=None: reads.append(name) or original(self, name)
    )
    with pytest.raises(TorchFileError, match=r"has 1048592 bytes; 4 elements of FloatStorage need 16"):
        trainkit.load(grown)
    assert not [name for name in reads if "/data/" in name]


def _idx_header(shape: tuple[int, ...]) -> bytes:
    return bytes([0, 0, 0x08, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)


def test_a_gzip_idx_file_is_refused_from_its_header_before_inflating(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(_idx_header((60000, 256, 256)) + bytes(64 << 20)))
    assert path.stat().st_size < 1 << 20
    peak, err = _peak_mb(f"from trainkit.datasets.idx import read_idx\nread_idx({str(path)!r})")
    assert "IDXFormatError" in err and "more than a gzip file" in err and path.name in err
    assert peak < 40


def test_an_idx_header_past_int64_says_what_it_needs(tmp_path):
    path = tmp_path / "x-idx4-ubyte"
    path.write_bytes(_idx_header((0xFFFFFFFF,) * 4) + bytes(16))
    with pytest.raises(IDXFormatError, match=r"need 340282366604025813516997721482669850625 bytes") as caught:
        read_idx(path)
    assert "-9223372036854775808" not in str(caught.value)


def test_real_gzip_idx_files_still_read(tmp_path):
    values = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(_idx_header(values.shape) + values.tobytes()))
    assert np.array_equal(read_idx(path, ndim=3), values)
    extra = tmp_path / "y-idx3-ubyte.gz"
    extra.write_bytes(gzip.compress(_idx_header(values.shape) + values.tobytes() + b"\x00\x00"))
    with pytest.raises(IDXFormatError, match=r"need 60 bytes of data, the file has 62 \(extra bytes follow"):
        read_idx(extra)


def test_the_limits_do_not_touch_a_real_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(30, 20), torch.nn.ReLU(), torch.nn.Linear(20, 2))
    path = tmp_path / "net.pt"
    torch.save(net.state_dict(), path)
    loaded = trainkit.load(path)
    assert set(loaded) == set(net.state_dict())
    buffer = io.BytesIO()
    trainkit.save({"w": trainkit.ones(3)}, buffer)
    buffer.seek(0)
    assert trainkit.load(buffer)["w"].tolist() == [1.0, 1.0, 1.0]
