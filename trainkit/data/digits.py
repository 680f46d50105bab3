"""The 8x8 handwritten digits that ship inside scikit-learn (1,797 images, 10 classes), as a TensorDataset."""

from __future__ import annotations

import numpy as np

from ..autograd.tensor import Tensor
from .dataset import TensorDataset


def digits(flatten: bool = False) -> TensorDataset:
    """Images as float32 in [0, 1] of shape (N, 1, 8, 8) (or (N, 64) with ``flatten``) and int64 labels.

    Needs scikit-learn (``pip install 'trainkit[examples]'``); nothing is downloaded: the data set is in the
    package.

    >>> ds = digits()  # doctest: +SKIP
    >>> ds[0][0].shape, len(ds)  # doctest: +SKIP
    (trainkit.Size([1, 8, 8]), 1797)
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError(
            "the digits data set comes with scikit-learn: pip install scikit-learn (or trainkit[examples])"
        ) from None
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)
    x = images.reshape(len(images), 64) if flatten else images.reshape(len(images), 1, 8, 8)
    return TensorDataset(Tensor._make(np.ascontiguousarray(x)), Tensor._make(bunch.target.astype(np.int64)))
