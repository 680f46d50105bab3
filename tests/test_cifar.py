"""CIFAR10 from torchvision's folder layout: small batch files in the real pickle format, a batch that tries to run
code (refused), broken files, and download=True of the tar.gz from a local HTTP server."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import doc_blocks

import trainkit
from tests.test_downloads import server  # noqa: F401  (the local HTTP server fixture)
from trainkit.datasets import CIFAR10, BatchFormatError
from trainkit.datasets.cifar import read_batch

TRAIN = [f"data_batch_{i}" for i in range(1, 6)]


def _batch(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        b"batch_label": b"testing batch",
        b"labels": rng.integers(0, 10, n).tolist(),
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"filenames": [b"x.png"] * n,
    }


def _write(root: Path, n: int = 4) -> dict[str, dict]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    batches = {name: _batch(n, seed) for seed, name in enumerate([*TRAIN, "test_batch"])}
    for name, batch in batches.items():
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))  # the protocol of the published files
    return batches


def test_train_and_test_splits_read_as_torchvision_lays_them_out(tmp_path):
    batches = _write(tmp_path)
    train, test = CIFAR10(tmp_path), CIFAR10(str(tmp_path), train=False)
    assert (len(train), len(test)) == (20, 4)
    image, label = train[5]  # the second sample of data_batch_2
    raw = batches["data_batch_2"][b"data"][1]
    assert image.shape == (3, 32, 32) and image.dtype == trainkit.float32
    np.testing.assert_allclose(image.numpy(), raw.reshape(3, 32, 32) / np.float32(255), rtol=1e-6)
    assert label == batches["data_batch_2"][b"labels"][1] and isinstance(label, int)
    assert train.targets[:4] == batches["data_batch_1"][b"labels"]
    assert train.data.shape == (20, 32, 32, 3) and train.data.dtype == np.uint8  # HWC, as torchvision keeps it
    assert train.class_to_idx["truck"] == 9


def test_transforms_receive_the_uint8_image(tmp_path):
    batches = _write(tmp_path)
    seen = []
    data = CIFAR10(
        tmp_path, train=False, transform=lambda im: seen.append(im) or im.mean(), target_transform=lambda t: t + 100
    )
    value, target = data[0]
    assert seen[0].shape == (32, 32, 3) and seen[0].dtype == np.uint8
    np.testing.assert_array_equal(seen[0], batches["test_batch"][b"data"][0].reshape(3, 32, 32).transpose(1, 2, 0))
    assert target == batches["test_batch"][b"labels"][0] + 100


def test_a_batch_that_names_a_function_is_refused_without_running_it(tmp_path):
    _write(tmp_path)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "cifar-10-batches-py" / "test_batch"
    evil.write_bytes(pickle.dumps({b"data": Payload(), b"labels": []}, protocol=2))
    with pytest.raises(BatchFormatError, match=r"test_batch: names (posix|os)\.system.*refused"):
        CIFAR10(tmp_path, train=False)
    assert not marker.exists()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not a pickle at all", "not a CIFAR batch"),
        (pickle.dumps([1, 2, 3], protocol=2), r"uint8 data of shape \(N, 3072\)"),
        (pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, protocol=2), r"\(N, 3072\)"),
        (pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, protocol=2), "2 labels from 0 to 9"),
        (pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, protocol=2), "labels from 0 to 9"),
    ],
)
def test_broken_batches_name_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "data_batch_1"
    path.write_bytes(content)
    with pytest.raises(BatchFormatError, match=message) as err:
        read_batch(path)
    assert str(path) in str(err.value)


def test_a_truncated_batch_is_named(tmp_path):
    _write(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(BatchFormatError, match="data_batch_3: not a CIFAR batch"):
        CIFAR10(tmp_path)


def test_missing_files_say_where_to_put_them(tmp_path):
    _write(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_4").unlink()
    with pytest.raises(RuntimeError, match="Dataset not found: put data_batch_4 in .*download=True"):
        CIFAR10(tmp_path)


def _archive(source: Path, into: Path, extra: tarfile.TarInfo | None = None) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(source / "cifar-10-batches-py", arcname="cifar-10-batches-py")
        if extra is not None:
            tar.addfile(extra, io.BytesIO(b"x" * extra.size) if extra.isfile() else None)
    (into / "cifar-10-python.tar.gz").write_bytes(buffer.getvalue())
    return hashlib.md5(buffer.getvalue(), usedforsecurity=False).hexdigest()


def test_download_unpacks_the_archive_from_a_mirror(server, tmp_path, monkeypatch):  # noqa: F811
    served, url = server
    source = tmp_path / "source"
    batches = _write(source)
    md5 = _archive(source, served)
    monkeypatch.setattr(CIFAR10, "mirrors", ["http://127.0.0.1:9/nothing-here/", url])
    monkeypatch.setattr(CIFAR10, "archive", ("cifar-10-python.tar.gz", md5))
    root = tmp_path / "root"
    data = CIFAR10(root, train=True, download=True)
    assert len(data) == 20 and data.targets[-4:] == batches["data_batch_5"][b"labels"]
    assert (root / "cifar-10-python.tar.gz").is_file()
    assert len(CIFAR10(root, train=False, download=True)) == 4  # already there: nothing fetched again


@pytest.mark.parametrize("kind", ["link", "escape"])
def test_an_archive_with_a_link_or_a_path_outside_root_unpacks_nothing(server, tmp_path, monkeypatch, kind):  # noqa: F811
    served, url = server
    source = tmp_path / "source"
    _write(source)
    member = tarfile.TarInfo("cifar-10-batches-py/evil" if kind == "link" else "../outside.txt")
    if kind == "link":
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
    else:
        member.size = 3
    md5 = _archive(source, served, member)
    monkeypatch.setattr(CIFAR10, "mirrors", [url])
    monkeypatch.setattr(CIFAR10, "archive", ("cifar-10-python.tar.gz", md5))
    root = tmp_path / "root"
    with pytest.raises(BatchFormatError, match="not a plain file or folder inside"):
        CIFAR10(root, download=True)
    assert not (root / "cifar-10-batches-py").exists() and not (tmp_path / "outside.txt").exists()


def test_importable_as_in_torchvision():
    from trainkit.datasets import cifar

    assert cifar.CIFAR10 is CIFAR10 and CIFAR10.classes[0] == "airplane" and len(CIFAR10.classes) == 10


def test_docs_example_runs(tmp_path, monkeypatch, capsys):
    blocks = doc_blocks("CIFAR-10")
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    batches = _write(tmp_path / "data")
    exec(compile(blocks[0], "docs/ecosystem.md", "exec"), {})
    label = batches["test_batch"][b"labels"][0]
    assert capsys.readouterr().out == f"4 (3, 32, 32) {CIFAR10.classes[label]}\n"
