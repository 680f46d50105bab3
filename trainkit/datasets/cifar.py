"""CIFAR-10 from torchvision's folder layout (``root/cifar-10-batches-py/``), read without running code.

The batches are Python pickles of ``{b"data": uint8 (N, 3072), b"labels": [...]}``. A pickle can name any function
and call it, so they are read with an unpickler that accepts only the names such a file holds (NumPy's array
rebuilding and ``_codecs.encode``) and refuses everything else, naming it.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd.backend import get_default_dtype
from ..autograd.creation import from_numpy
from ..data.dataset import Dataset
from .download import download as fetch

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class BatchFormatError(ValueError):
    """A CIFAR batch file that is not one: the message names the file and what is wrong."""


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, where: str):
        super().__init__(io.BytesIO(data), encoding="bytes")
        self.where = where

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise BatchFormatError(
                f"{self.where}: names {module}.{name}, which a CIFAR batch never holds; refused without running it"
            )
        return super().find_class(module, name)


def read_batch(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """The (N, 32, 32, 3) uint8 images and (N,) int64 labels of one batch file.

    >>> read_batch("no/such/file")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no CIFAR batch at no/such/file
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CIFAR batch at {path}")
    try:
        batch = _Unpickler(path.read_bytes(), str(path)).load()
    except BatchFormatError:
        raise
    except Exception as err:  # a truncated or foreign file: one line naming it
        raise BatchFormatError(f"{path}: not a CIFAR batch ({type(err).__name__}: {err})") from None
    data = batch.get(b"data") if isinstance(batch, dict) else None
    labels = batch.get(b"labels", batch.get(b"fine_labels")) if isinstance(batch, dict) else None
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise BatchFormatError(f"{path}: expected uint8 data of shape (N, 3072)")
    labels = np.asarray(labels if labels is not None else [], dtype=np.int64)
    if labels.shape != (len(data),) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
        raise BatchFormatError(f"{path}: expected {len(data)} labels from 0 to 9")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


class CIFAR10(Dataset):
    """CIFAR-10, as ``torchvision.datasets.CIFAR10``: 50,000 training and 10,000 test 32x32 colour images.

    Reads ``root/cifar-10-batches-py/data_batch_1`` to ``_5`` (``train=True``) or ``test_batch``. Without a
    ``transform`` an image is a float32 (3, 32, 32) tensor in [0, 1] (what ``ToTensor`` makes); a ``transform``
    receives the uint8 (32, 32, 3) array, as ``np.asarray`` of torchvision's PIL image. ``download=True`` fetches
    and unpacks ``cifar-10-python.tar.gz`` (checked against its MD5) from ``mirrors``.

    >>> CIFAR10.classes[:3]
    ['airplane', 'automobile', 'bird']
    """

    base_folder = "cifar-10-batches-py"
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    mirrors = ["https://www.cs.toronto.edu/~kriz/"]
    archive = ("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a")
    archive_size = 170498071  # bytes, as published: a mirror sending more is given up at once

    def __init__(
        self,
        root: str | os.PathLike,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        download: bool = False,
    ):
        self.root, self.train = os.path.expanduser(os.fspath(root)), train
        self.transform, self.target_transform = transform, target_transform
        names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
        folder = Path(self.root) / self.base_folder
        if download and not all((folder / n).is_file() for n in names):
            self._download()
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise RuntimeError(
                f"Dataset not found: put {', '.join(missing)} in {folder.resolve()} (the folder "
                "cifar-10-python.tar.gz unpacks to, as torchvision uses), or pass download=True"
            )
        parts = [read_batch(folder / n) for n in names]
        self.data = np.concatenate([p[0] for p in parts])
        self.targets = np.concatenate([p[1] for p in parts]).tolist()

    def _download(self) -> None:
        name, md5 = self.archive
        path = fetch(name, self.root, md5, self.mirrors, size=self.archive_size)
        root = Path(self.root).resolve()
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():  # only plain files and folders inside root: no links, no '..'
                target = (root / member.name).resolve()
                if not (member.isfile() or member.isdir()) or (target != root and root not in target.parents):
                    raise BatchFormatError(
                        f"{path}: member {member.name!r} is not a plain file or folder inside "
                        f"{root}; refused, nothing unpacked"
                    )
            # the 'data' filter (where this Python has it) also drops permission bits and device files
            extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(root, **extra)  # noqa: S202  (every member checked above)

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image, target = self.data[int(index)], int(self.targets[int(index)])
        if self.transform is not None:
            image = self.transform(image)
        else:
            dt = get_default_dtype().np
            image = from_numpy(image.transpose(2, 0, 1).astype(dt) / dt.type(255))
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target
