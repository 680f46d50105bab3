"""trainkit.datasets (MNIST, FashionMNIST from torchvision's folder layout, IDX files) and trainkit.transforms."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import doc_blocks

import trainkit
import trainkit.datasets
import trainkit.transforms
from trainkit.data import DataLoader
from trainkit.datasets import MNIST, FashionMNIST, IDXFormatError, parse_idx, read_idx
from trainkit.transforms import Compose, Normalize, RandomCrop, RandomHorizontalFlip, ToTensor

N = 10


def _idx(array: np.ndarray) -> bytes:
    """The bytes of an IDX file holding ``array`` (uint8)."""
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def _images(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)


def _write(root, folder: str = "MNIST", prefix: str = "train", compress: bool = False, n: int = N, seed: int = 0):
    images, labels = _images(n, seed)
    raw = root / folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for name, array in ((f"{prefix}-images-idx3-ubyte", images), (f"{prefix}-labels-idx1-ubyte", labels)):
        if compress:
            (raw / f"{name}.gz").write_bytes(gzip.compress(_idx(array)))
        else:
            (raw / name).write_bytes(_idx(array))
    return images, labels


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_train_and_test_splits(tmp_path, compress):
    images, labels = _write(tmp_path, compress=compress)
    test_images, test_labels = _write(tmp_path, prefix="t10k", compress=compress, n=4, seed=1)
    train, test = MNIST(tmp_path), MNIST(str(tmp_path), train=False)
    assert (len(train), len(test)) == (N, 4)
    for ds, ims, labs in ((train, images, labels), (test, test_images, test_labels)):
        for i in range(len(ds)):
            image, target = ds[i]
            assert isinstance(image, trainkit.Tensor) and image.dtype == trainkit.float32
            assert tuple(image.shape) == (1, 28, 28)
            assert type(target) is int and target == labs[i]
            np.testing.assert_array_equal(image.numpy()[0], ims[i].astype(np.float32) / np.float32(255))
    assert 0.0 <= train[0][0].min().item() and train[0][0].max().item() <= 1.0
    assert train.data.dtype == trainkit.uint8 and tuple(train.data.shape) == (N, 28, 28)
    assert train.targets.dtype == trainkit.int64 and train.targets.tolist() == labels.tolist()
    assert train[-1][1] == labels[-1]
    assert train.class_to_idx["3 - three"] == 3
    assert "Split: Train" in repr(train) and "Split: Test" in repr(test)


def test_fashion_mnist_reads_its_own_folder(tmp_path):
    _, labels = _write(tmp_path, folder="FashionMNIST")
    ds = FashionMNIST(tmp_path, train=True)
    assert len(ds) == N and ds[3][1] == labels[3]
    assert ds.classes[ds[3][1]] == FashionMNIST.classes[labels[3]]
    with pytest.raises(RuntimeError, match="MNIST"):
        MNIST(tmp_path)  # the digits live in root/MNIST/raw, not in FashionMNIST's folder


def test_transforms_receive_the_uint8_array(tmp_path):
    images, labels = _write(tmp_path)
    seen = []

    def spy(image):
        seen.append(image)
        return image

    ds = MNIST(
        tmp_path,
        transform=Compose([spy, ToTensor(), Normalize((0.1307,), (0.3081,))]),
        target_transform=lambda t: t + 100,
    )
    image, target = ds[2]
    assert seen[0].dtype == np.uint8 and seen[0].shape == (28, 28)
    assert target == labels[2] + 100
    expected = (images[2].astype(np.float32) / np.float32(255) - np.float32(0.1307)) / np.float32(0.3081)
    np.testing.assert_allclose(image.numpy()[0], expected, rtol=1e-6, atol=1e-6)


def test_dataloader_over_mnist(tmp_path):
    _, labels = _write(tmp_path)
    batches = list(DataLoader(MNIST(tmp_path), batch_size=4))
    assert [tuple(x.shape) for x, _ in batches] == [(4, 1, 28, 28), (4, 1, 28, 28), (2, 1, 28, 28)]
    assert all(x.dtype == trainkit.float32 and y.dtype == trainkit.int64 for x, y in batches)
    assert sum((y.tolist() for _, y in batches), []) == labels.tolist()
    trainkit.manual_seed(0)
    shuffled = sum((y.tolist() for _, y in DataLoader(MNIST(tmp_path), batch_size=3, shuffle=True)), [])
    assert sorted(shuffled) == sorted(labels.tolist())


def test_missing_files_say_where_to_put_them(tmp_path):
    with pytest.raises(
        RuntimeError,
        match=r"Dataset not found: put train-images-idx3-ubyte and "
        r"train-labels-idx1-ubyte .* in .*MNIST/raw",
    ):
        MNIST(tmp_path)
    _write(tmp_path, compress=True)
    assert len(MNIST(tmp_path, download=True)) == N  # the files are there: nothing to download


@pytest.mark.parametrize("compress", [False, True])
def test_truncated_file_names_it(tmp_path, compress):
    _write(tmp_path, compress=compress)
    name = "train-images-idx3-ubyte" + (".gz" if compress else "")
    path = tmp_path / "MNIST" / "raw" / name
    path.write_bytes(path.read_bytes()[:-100])
    expected = "cannot decompress" if compress else r"need 7840 bytes of data, the file has 7740 \(it is truncated\)"
    with pytest.raises(IDXFormatError, match=f"{name}: .*{expected}" if not compress else expected) as caught:
        MNIST(tmp_path)
    assert name in str(caught.value)


def test_mismatched_and_malformed_files(tmp_path):
    _write(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx(np.zeros(N - 1, np.uint8)))
    with pytest.raises(IDXFormatError, match=f"has {N} images but .*train-labels-idx1-ubyte has {N - 1} labels"):
        MNIST(tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx(np.full(N, 10, np.uint8)))
    with pytest.raises(IDXFormatError, match="label 10 is out of range"):
        MNIST(tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx(np.zeros((N, 1), np.uint8)))
    with pytest.raises(IDXFormatError, match="train-labels-idx1-ubyte: an IDX file of 2 dimensions; expected 1"):
        MNIST(tmp_path)
    (raw / "train-labels-idx1-ubyte").write_bytes(b"\x1f\x8b\x08\x01" + bytes(8))
    with pytest.raises(IDXFormatError, match="bad IDX magic number 0x1f8b0801"):
        MNIST(tmp_path)


def test_parse_idx_types_and_headers():
    values = np.arange(6, dtype=">i4").reshape(2, 3)
    data = bytes([0, 0, 0x0C, 2]) + struct.pack(">2I", 2, 3) + values.tobytes()
    out = parse_idx(data)
    assert out.dtype == np.int32 and out.dtype.isnative and out.tolist() == values.tolist()
    floats = np.array([1.5, -2.25], dtype=">f8")
    assert parse_idx(bytes([0, 0, 0x0E, 1]) + struct.pack(">I", 2) + floats.tobytes()).tolist() == [1.5, -2.25]
    with pytest.raises(IDXFormatError, match="too short"):
        parse_idx(b"\x00\x00", "x.idx")
    with pytest.raises(IDXFormatError, match="x.idx: the header of 3 dimensions needs 16 bytes"):
        parse_idx(bytes([0, 0, 8, 3, 0, 0, 0, 1]), "x.idx")
    with pytest.raises(IDXFormatError, match=r"extra bytes follow the data"):
        parse_idx(_idx(np.zeros(3, np.uint8)) + b"\x00", "x.idx")


def test_read_idx_plain_and_gzip(tmp_path):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    (tmp_path / "a-idx2-ubyte").write_bytes(_idx(array))
    (tmp_path / "a-idx2-ubyte.gz").write_bytes(gzip.compress(_idx(array)))
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx2-ubyte"), array)
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx2-ubyte.gz", ndim=2), array)


# ---- transforms ---------------------------------------------------------------------------------------------------


def test_to_tensor_layouts_and_dtypes():
    gray = np.arange(6, dtype=np.uint8).reshape(2, 3) * 40
    t = ToTensor()(gray)
    assert tuple(t.shape) == (1, 2, 3) and t.dtype == trainkit.float32
    np.testing.assert_array_equal(t.numpy()[0], gray.astype(np.float32) / np.float32(255))
    rgb = np.random.default_rng(0).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    t = ToTensor()(rgb)
    assert tuple(t.shape) == (3, 4, 5)
    np.testing.assert_array_equal(t.numpy(), rgb.transpose(2, 0, 1).astype(np.float32) / np.float32(255))
    floats = np.full((2, 2, 1), 7.5, dtype=np.float32)
    assert ToTensor()(floats).numpy().tolist() == [[[7.5, 7.5], [7.5, 7.5]]]  # not scaled, as in torchvision
    with pytest.raises(TypeError, match="already converted"):
        ToTensor()(trainkit.ones(1, 2, 2))
    with pytest.raises(ValueError, match="2 or 3 dimensional"):
        ToTensor()(np.zeros(3, np.uint8))


def test_to_tensor_matches_torch(torch):
    rgb = np.random.default_rng(1).integers(0, 256, (6, 7, 3), dtype=np.uint8)
    expected = torch.from_numpy(rgb.transpose(2, 0, 1).copy()).float().div(255).numpy()
    np.testing.assert_array_equal(ToTensor()(rgb).numpy(), expected)


def test_normalize():
    x = trainkit.ones(3, 2, 2)
    out = Normalize((0.5, 0.25, 1.0), (0.5, 0.25, 2.0))(x)
    assert out[:, 0, 0].tolist() == [1.0, 3.0, 0.0]
    assert Normalize(0.5, 0.5)(trainkit.zeros(2, 1, 1)).flatten().tolist() == [-1.0, -1.0]
    batch = Normalize((1.0, 2.0), (1.0, 1.0))(trainkit.zeros(4, 2, 3, 3))
    assert set(batch[:, 1].flatten().tolist()) == {-2.0} and set(batch[:, 0].flatten().tolist()) == {-1.0}
    y = trainkit.ones(1, 2, 2)
    assert Normalize((1.0,), (1.0,), inplace=True)(y) is y and y.sum().item() == 0.0
    with pytest.raises(ValueError, match="division by zero"):
        Normalize((0.0,), (0.0,))
    with pytest.raises(TypeError, match="float tensor"):
        Normalize((0.0,), (1.0,))(trainkit.ones(1, 2, 2, dtype=trainkit.uint8))


def test_random_horizontal_flip_follows_the_seed():
    x = trainkit.arange(6, dtype=trainkit.float32).reshape(1, 2, 3)
    assert RandomHorizontalFlip(1.0)(x).tolist() == [[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]]
    assert RandomHorizontalFlip(0.0)(x) is x
    flip = RandomHorizontalFlip()
    trainkit.manual_seed(3)
    first = [flip(x)[0, 0, 0].item() for _ in range(40)]
    trainkit.manual_seed(3)
    assert [flip(x)[0, 0, 0].item() for _ in range(40)] == first
    assert set(first) == {0.0, 2.0}  # both outcomes occur at p=0.5


def test_random_crop_padding_and_seed():
    x = trainkit.arange(1, 17, dtype=trainkit.float32).reshape(1, 4, 4)
    crop = RandomCrop(4, padding=2)
    trainkit.manual_seed(0)
    outs = [crop(x) for _ in range(30)]
    assert all(tuple(o.shape) == (1, 4, 4) for o in outs)
    assert any(o.min().item() == 0.0 for o in outs)  # some crops reach into the zero border
    for o in outs:  # every crop is a window of the padded image
        padded = np.pad(x.numpy(), ((0, 0), (2, 2), (2, 2)))
        windows = [padded[:, i : i + 4, j : j + 4] for i in range(5) for j in range(5)]
        assert any(np.array_equal(o.numpy(), w) for w in windows)
    trainkit.manual_seed(0)
    assert all(np.array_equal(crop(x).numpy(), o.numpy()) for o in outs)
    assert RandomCrop(4)(x).tolist() == x.tolist()  # no padding, full size: the only window
    assert tuple(RandomCrop((2, 3))(x).shape) == (1, 2, 3)
    assert tuple(RandomCrop(6, pad_if_needed=True)(x).shape) == (1, 6, 6)
    edge = RandomCrop(6, padding=1, padding_mode="edge")(x)
    assert edge.tolist() == np.pad(x.numpy(), ((0, 0), (1, 1), (1, 1)), mode="edge").tolist()
    assert RandomCrop(6, padding=(1, 1), fill=9)(x)[0, 0, 0].item() == 9.0
    with pytest.raises(ValueError, match="larger than input image size"):
        RandomCrop(5)(x)
    with pytest.raises(ValueError, match="padding_mode"):
        RandomCrop(4, padding_mode="wrap")


def test_mnist_with_augmentation_in_a_dataloader(tmp_path):
    _write(tmp_path)
    transform = Compose(
        [ToTensor(), RandomCrop(28, padding=4), RandomHorizontalFlip(), Normalize((0.1307,), (0.3081,))]
    )
    trainkit.manual_seed(0)
    first = [x.numpy().copy() for x, _ in DataLoader(MNIST(tmp_path, transform=transform), batch_size=5)]
    trainkit.manual_seed(0)
    again = [x.numpy() for x, _ in DataLoader(MNIST(tmp_path, transform=transform), batch_size=5)]
    assert [a.shape for a in first] == [(5, 1, 28, 28)] * 2
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert "RandomCrop(size=(28, 28), padding=4)" in repr(transform)


def test_submodules_import_as_in_torchvision():
    assert trainkit.datasets.MNIST is MNIST and trainkit.transforms.ToTensor is ToTensor


def test_docs_example_runs(tmp_path, monkeypatch, capsys):
    blocks = doc_blocks("MNIST from a local folder")
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "data")
    exec(compile(blocks[0], "docs/ecosystem.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        f"{N} (1, 28, 28) trainkit.float32 int",
        "(4, 1, 28, 28) trainkit.int64",
    ]


def test_the_mnist_config_trains_from_a_local_folder(tmp_path):
    import subprocess
    import sys

    _write(tmp_path / "data", compress=True, n=200)
    config = Path(__file__).resolve().parents[1] / "configs" / "mnist.yaml"
    sets = [
        "--set",
        f"data.init_args.root={tmp_path / 'data'}",
        "--set",
        "trainer.epochs=2",
        "--set",
        "trainer.batch_size=50",
    ]
    checked = subprocess.run(
        [sys.executable, "-m", "trainkit", "check", config, *sets],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stderr
    assert "OK (MnistCNN" in checked.stdout and "inputs (50, 1, 28, 28) float32, targets (50,) int64" in checked.stdout
    trained = subprocess.run(
        [sys.executable, "-m", "trainkit", "train", config, *sets],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout.strip().splitlines()[-1].startswith("done: 2 epochs")
