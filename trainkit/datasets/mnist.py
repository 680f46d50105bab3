"""MNIST and Fashion-MNIST from torchvision's folder layout: ``root/MNIST/raw/train-images-idx3-ubyte`` (or .gz)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd.backend import get_default_dtype
from ..autograd.creation import from_numpy
from ..data.dataset import Dataset
from .download import download as fetch
from .idx import IDXFormatError, read_idx


class MNIST(Dataset):
    """The MNIST digits, as ``torchvision.datasets.MNIST``: 60,000 training and 10,000 test 28x28 images.

    The files are read from ``root/MNIST/raw/`` (the folder torchvision downloads into): for ``train=True``
    ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte``, else ``t10k-images-idx3-ubyte`` and
    ``t10k-labels-idx1-ubyte``, each plain or gzip-compressed (the same name ending in ``.gz``).

    ``dataset[i]`` is ``(image, target)``, ``target`` an int. Without a ``transform`` the image is a float32
    (1, 28, 28) tensor in [0, 1], the tensor ``ToTensor()`` makes; torchvision returns a PIL image there. A
    ``transform`` receives the image as a uint8 (28, 28) NumPy array (``np.asarray`` of torchvision's PIL image),
    so ``transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])`` works as in
    torchvision. ``data`` (a uint8 (N, 28, 28) tensor) and ``targets`` (int64) are torchvision's attributes.

    ``download=True`` fetches the missing files into ``raw_folder`` from the first of ``mirrors`` that answers
    (a class attribute to override, torchvision's by default), resuming a broken transfer and keeping a file only
    when its MD5 is that of ``resources``.

    >>> train = MNIST("data", train=True)            # doctest: +SKIP
    >>> image, target = train[0]                      # doctest: +SKIP
    >>> tuple(image.shape), image.dtype, target       # doctest: +SKIP
    ((1, 28, 28), trainkit.float32, 5)
    """

    classes = [
        "0 - zero",
        "1 - one",
        "2 - two",
        "3 - three",
        "4 - four",
        "5 - five",
        "6 - six",
        "7 - seven",
        "8 - eight",
        "9 - nine",
    ]
    files = {
        True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }
    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    # the published sizes: a mirror sending more is not sending these files, and is given up at once
    sizes = {
        "train-images-idx3-ubyte.gz": 9912422,
        "train-labels-idx1-ubyte.gz": 28881,
        "t10k-images-idx3-ubyte.gz": 1648877,
        "t10k-labels-idx1-ubyte.gz": 4542,
    }

    def __init__(
        self,
        root: str | os.PathLike,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        download: bool = False,
    ):
        self.root = os.path.expanduser(os.fspath(root))
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        found = [self._find(name) for name in self.files[bool(train)]]
        if None in found and download:
            for filename, md5 in self.resources:  # all four, as torchvision downloads them
                if self._find(filename.removesuffix(".gz")) is None:
                    fetch(filename, self.raw_folder, md5, self.mirrors, size=self.sizes.get(filename))
            found = [self._find(name) for name in self.files[bool(train)]]
        if None in found:
            raise RuntimeError(self._missing_message(download))
        images_path, labels_path = found
        images = read_idx(images_path, ndim=3)
        labels = read_idx(labels_path, ndim=1)
        if images.dtype != np.uint8 or labels.dtype != np.uint8:
            raise IDXFormatError(
                f"{images_path}, {labels_path}: expected unsigned bytes, found {images.dtype} "
                f"images and {labels.dtype} labels"
            )
        if len(images) != len(labels):
            raise IDXFormatError(f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} labels")
        if labels.size and labels.max() >= len(self.classes):
            raise IDXFormatError(f"{labels_path}: label {labels.max()} is out of range for {len(self.classes)} classes")
        self.data = from_numpy(images)
        self.targets = from_numpy(labels.astype(np.int64))

    @property
    def raw_folder(self) -> str:
        """Where the files are read from: ``root/<class name>/raw``, as in torchvision."""
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    def _find(self, name: str) -> Path | None:
        for candidate in (Path(self.raw_folder) / name, Path(self.raw_folder) / f"{name}.gz"):
            if candidate.is_file():
                return candidate
        return None

    def _missing_message(self, download: bool) -> str:
        names = " and ".join(self.files[bool(self.train)])
        where = (
            f"put {names} (or the same names ending in .gz, as downloaded) in {os.path.abspath(self.raw_folder)}"
            f" (the folder layout torchvision uses)"
        )
        return f"Dataset not found: {where}, or pass download=True"

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image = self.data.numpy()[int(index)]
        target = int(self.targets.numpy()[int(index)])
        if self.transform is not None:
            image = self.transform(image)
        else:
            dt = get_default_dtype().np
            image = from_numpy(image[None].astype(dt) / dt.type(255))  # what ToTensor makes of it
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        lines = [
            f"Dataset {type(self).__name__}",
            f"    Number of datapoints: {len(self)}",
            f"    Root location: {self.root}",
            f"    Split: {'Train' if self.train else 'Test'}",
        ]
        if self.transform is not None:
            lines.append(f"    Transform: {self.transform!r}")
        if self.target_transform is not None:
            lines.append(f"    Target transform: {self.target_transform!r}")
        return "\n".join(lines)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST, as ``torchvision.datasets.FashionMNIST``: MNIST's format and file names, read from
    ``root/FashionMNIST/raw/``; ten kinds of clothing instead of digits.

    >>> FashionMNIST.classes[:3]
    ['T-shirt/top', 'Trouser', 'Pullover']
    """

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    sizes = {
        "train-images-idx3-ubyte.gz": 26421880,
        "train-labels-idx1-ubyte.gz": 29515,
        "t10k-images-idx3-ubyte.gz": 4422102,
        "t10k-labels-idx1-ubyte.gz": 5148,
    }
