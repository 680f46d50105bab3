"""Datasets with torchvision's names and signatures (``torchvision.datasets``), read from local files.

``MNIST("data")`` reads ``data/MNIST/raw/train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (or the .gz
files); each sample is a float32 (1, 28, 28) tensor in [0, 1] and an int label. ``CIFAR10("data")`` reads the
pickled batches in ``data/cifar-10-batches-py/`` without running code from them.

>>> from trainkit.datasets import MNIST
>>> train = MNIST("data", train=True)             # doctest: +SKIP
>>> image, label = train[0]                       # doctest: +SKIP
"""

from .cifar import CIFAR10, BatchFormatError
from .idx import IDXFormatError, parse_idx, read_idx
from .mnist import MNIST, FashionMNIST

__all__ = ["BatchFormatError", "CIFAR10", "IDXFormatError", "FashionMNIST", "MNIST", "parse_idx", "read_idx"]
