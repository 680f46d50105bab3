"""Packed sequences and padding helpers for recurrent layers (torch.nn.utils.rnn).

A batch of sequences of different lengths ``L_0 >= L_1 >= ...`` packs into ``data`` of shape (sum L_b, *) holding,
time step by time step, the step ``t`` of every sequence still running at ``t``; ``batch_sizes[t]`` counts them.
``sorted_indices`` maps the packed (length-sorted) order to the caller's batch order, ``unsorted_indices`` back.
"""

from __future__ import annotations

from typing import NamedTuple

from ..autograd.backend import to_dtype
from ..autograd.creation import arange, empty, empty_like
from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor

__all__ = ["PackedSequence"]


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of 0..n-1: ``out[permutation[i]] = i``; None stays None.

    >>> import trainkit
    >>> invert_permutation(trainkit.tensor([2, 0, 1])).tolist()
    [1, 2, 0]
    """
    if permutation is None:
        return None
    inverse = empty_like(permutation)
    with no_grad():
        inverse[permutation] = arange(permutation.numel(), dtype=permutation.dtype, device=permutation.device)
    return inverse


class _PackedSequenceBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceBase):
    """A batch of variable-length sequences packed time step by time step, as ``torch.nn.utils.rnn.PackedSequence``.

    Fields: ``data`` (sum of lengths, *), ``batch_sizes`` (int64 CPU tensor, one count per time step),
    ``sorted_indices`` and ``unsorted_indices`` (int64 permutations of the batch, or None when the batch was
    already sorted by decreasing length). Build it with ``pack_padded_sequence`` or ``pack_sequence`` rather than
    by hand; ``PackedSequence(data, batch_sizes, sorted_indices)`` fills ``unsorted_indices`` in.

    >>> import trainkit
    >>> packed = PackedSequence(trainkit.tensor([1., 2., 3.]), trainkit.tensor([2, 1]))
    >>> packed.batch_sizes.tolist()
    [2, 1]
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError(
                    "batch_sizes should always be on CPU. Instances of PackedSequence should never be created "
                    "manually. They should be instantiated by functions like pack_sequence and pack_padded_sequences "
                    "in nn.utils.rnn. https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence"
                )
        else:
            if not isinstance(data, (list, tuple)) or len(data) != 2:
                raise ValueError("PackedSequence needs batch_sizes, or data as a pair (data, batch_sizes)")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """``data.to(*args, **kwargs)``; the indices follow to the new device, ``batch_sizes`` stays on the CPU.

        >>> import trainkit
        >>> packed = PackedSequence(trainkit.tensor([1., 2., 3.]), trainkit.tensor([2, 1]))
        >>> packed.to(trainkit.float64).data.dtype
        trainkit.float64
        """
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        # only the device moves the indices: a dtype given for the data must not turn them into floats
        kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "dtype")}
        sorted_indices = self.sorted_indices
        unsorted_indices = self.unsorted_indices
        if sorted_indices is not None:
            sorted_indices = sorted_indices.to(data.device, **kwargs)
        if unsorted_indices is not None:
            unsorted_indices = unsorted_indices.to(data.device, **kwargs)
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cuda(self, *args, **kwargs) -> PackedSequence:
        """The packed sequence with its data and indices on the GPU (``batch_sizes`` stays on the CPU)."""
        target = empty(0, dtype=self.data.dtype, device=self.data.device).cuda(*args, **kwargs).device
        if target == self.data.device:
            return self
        return self.to(device=target)

    def cpu(self) -> PackedSequence:
        """The packed sequence with its data and indices on the CPU."""
        return self.to(device="cpu")

    def double(self) -> PackedSequence:
        """The packed sequence with float64 data."""
        return self.to(dtype=to_dtype("float64"))

    def float(self) -> PackedSequence:
        """The packed sequence with float32 data."""
        return self.to(dtype=to_dtype("float32"))

    def half(self) -> PackedSequence:
        """The packed sequence with float16 data."""
        return self.to(dtype=to_dtype("float16"))

    def long(self) -> PackedSequence:
        """The packed sequence with int64 data."""
        return self.to(dtype=to_dtype("int64"))

    def int(self) -> PackedSequence:
        """The packed sequence with int32 data."""
        return self.to(dtype=to_dtype("int32"))

    def short(self) -> PackedSequence:
        """The packed sequence with int16 data."""
        return self.to(dtype=to_dtype("int16"))

    def char(self) -> PackedSequence:
        """The packed sequence with int8 data."""
        return self.to(dtype=to_dtype("int8"))

    def byte(self) -> PackedSequence:
        """The packed sequence with uint8 data."""
        return self.to(dtype=to_dtype("uint8"))

    @property
    def is_cuda(self) -> bool:
        """Whether the data is on the GPU."""
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        """Whether the data lives in pinned host memory (never, for NumPy-backed data)."""
        is_pinned = getattr(self.data, "is_pinned", None)
        return bool(is_pinned()) if is_pinned is not None else False
