"""Lookups by integer index: ``embedding`` (rows of a weight matrix) and ``one_hot``."""

from __future__ import annotations

import numpy as np

from ..autograd.backend import xp_of
from ..autograd.function import Op
from ..autograd.ops import dual
from ..autograd.ops.shape import index_into_zeros
from ..autograd.tensor import Tensor

__all__ = ["embedding", "one_hot"]


class Embedding(Op, name="EmbeddingBackward0"):
    """out = weight[indices] (rows of weight).   dweight[r] = the sum of g over the positions whose index is r
    (divided by their count with ``scale_grad_by_freq``); the ``padding_idx`` row gets none."""

    # Its one input is the weight, yet the output is a batch of activations chosen by the indices: the graph
    # explorer must not count it as a value made of parameters alone (as it counts a weight's transpose).
    selects_by_data = True

    def forward(self, weight, indices, padding_idx, scale_grad_by_freq):
        self.extra = indices
        self.weight_shape, self.padding_idx, self.scale = weight.shape, padding_idx, scale_grad_by_freq
        return xp_of(weight).take(weight, indices, axis=0)

    def backward(self, g):
        xp = xp_of(dual.data(g))
        flat = self.extra.reshape(-1)
        dim = self.weight_shape[1]
        g = g.reshape(-1, dim)
        # the sort behind unique groups repeated indices; one bincount then adds each group's rows, column by column
        rows, inverse, counts = xp.unique(flat, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        if isinstance(g, Tensor):  # create_graph: build the sum with differentiable ops
            if self.scale:
                g = g / counts[inverse].reshape(-1, 1).astype(g._data.dtype)
            if self.padding_idx is not None:
                g = dual.where((flat != self.padding_idx).reshape(-1, 1), g, 0)
            return index_into_zeros(g, self.weight_shape, flat, True)
        slots = (inverse.reshape(-1, 1) * dim + xp.arange(dim)).reshape(-1)
        sums = xp.bincount(slots, weights=g.reshape(-1), minlength=rows.size * dim).reshape(rows.size, dim)
        if self.scale:
            sums /= counts.reshape(-1, 1)
        out = xp.zeros(self.weight_shape, dtype=g.dtype)
        out[rows] = sums
        if self.padding_idx is not None:
            out[self.padding_idx] = 0
        return out


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by the integer tensor ``input``.

    Repeated indices add their gradients up; the ``padding_idx`` row gets no gradient. With ``max_norm``, the rows
    looked up are first rescaled in place so that their ``norm_type``-norm is at most ``max_norm``.

    >>> import trainkit
    >>> w = trainkit.arange(6.0).reshape(3, 2)
    >>> embedding(trainkit.tensor([2, 0]), w)
    tensor([[4., 5.],
            [0., 1.]])
    """
    if sparse:
        raise NotImplementedError("sparse gradients are not supported: trainkit has no sparse tensors")
    indices = input._data
    if indices.dtype.kind not in "iu":
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got "
            f"{input.dtype} instead (while checking arguments for embedding)"
        )
    num = weight.shape[0]
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= num):
        raise IndexError("index out of range in self")
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= num
    if max_norm is not None:
        _renorm_rows(weight, indices, max_norm, norm_type)
    return Embedding.apply(weight, indices=indices, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)


def _renorm_rows(weight: Tensor, indices, max_norm: float, norm_type: float) -> None:
    """Scale the looked-up rows whose norm exceeds ``max_norm`` down to it, in place and unrecorded (as PyTorch)."""
    xp = xp_of(weight._data)
    rows = xp.unique(indices.reshape(-1))
    picked = weight._data[rows]
    norms = (xp.abs(picked) ** norm_type).sum(axis=1) ** (1 / norm_type)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1).astype(picked.dtype)
    weight._data[rows] = picked * scale.reshape(-1, 1)
    weight._version_counter[0] += 1


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows for integer class indices (``num_classes`` defaults to the largest index + 1).

    >>> import trainkit
    >>> one_hot(trainkit.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    data = tensor._data
    if data.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    xp = xp_of(data)
    if data.size and int(data.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(data.max()) + 1 if data.size else 0
    elif data.size and int(data.max()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = (data[..., None] == xp.arange(num_classes)).astype(np.int64)
    return Tensor._make(out)
