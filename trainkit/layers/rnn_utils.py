"""Packed sequences and padding helpers for recurrent layers (torch.nn.utils.rnn).

A batch of sequences of different lengths ``L_0 >= L_1 >= ...`` packs into ``data`` of shape (sum L_b, *) holding,
time step by time step, the step ``t`` of every sequence still running at ``t``; ``batch_sizes[t]`` counts them.
``sorted_indices`` maps the packed (length-sorted) order to the caller's batch order, ``unsorted_indices`` back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ..autograd import grad_mode
from ..autograd.backend import to_dtype, xp_of
from ..autograd.creation import arange, empty, empty_like, tensor
from ..autograd.function import Op
from ..autograd.grad_mode import no_grad
from ..autograd.ops.join import cat
from ..autograd.tensor import Tensor

_SORT_RUN = 16  # torch's introsort leaves runs of this length to insertion sort

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "pack_sequence",
    "unpad_sequence",
    "unpack_sequence",
]


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


class PackRows(Op, name="PackPaddedSequenceBackward0"):
    """out[k] = x[i[k], j[k]]: the packed rows picked out of a padded (T, B, *) or (B, T, *) tensor.

    The (i, j) pairs are distinct, so dx is g written back at (i, j) into zeros, nothing added up.
    """

    def forward(self, x, index):
        self.in_shape, self.index = x.shape, index
        return x[index]

    def backward(self, g):
        if isinstance(g, Tensor):
            return PadRows.apply(g, index=self.index, shape=self.in_shape, padding_value=0)
        out = xp_of(g).zeros(self.in_shape, dtype=g.dtype)
        out[self.index] = g
        return out


class PadRows(Op, name="CopySlices"):
    """out = padding_value everywhere but out[i[k], j[k]] = data[k]: packed rows spread into a padded tensor.

    d data = g[i, j], the rows read back at the positions they were written to.
    """

    def forward(self, data, index, shape, padding_value):
        self.index = index
        out = xp_of(data).full(shape, padding_value, dtype=data.dtype)
        out[index] = data
        return out

    def backward(self, g):
        if isinstance(g, Tensor):
            return PackRows.apply(g, index=self.index)
        return g[self.index]


def _on_device_of(x: Tensor, *arrays) -> tuple:
    xp = xp_of(x._data)
    return tuple(xp.asarray(a) for a in arrays)


def _lengths_array(lengths) -> np.ndarray:
    """``lengths`` as the int64 NumPy vector pack_padded_sequence reads, refused as torch refuses it."""
    if isinstance(lengths, Tensor):
        lengths = lengths.detach().to(to_dtype("int64"))
        if lengths.dim() != 1 or lengths.device.type != "cpu":
            raise RuntimeError(
                f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D "
                f"{lengths.device} Long tensor"
            )
        return np.asarray(lengths.numpy(), dtype=np.int64)
    array = np.asarray(lengths)
    if array.dtype == object:  # a list of one-element tensors
        array = np.array([int(v) for v in lengths])
    if array.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {array.ndim}D cpu Long tensor")
    return array.astype(np.int64)


def _sort_descending(lengths: np.ndarray) -> np.ndarray:
    """The batch order of decreasing length, ties placed exactly as torch's sort of the lengths places them.

    torch sorts the lengths with an unstable introsort (median-of-three quicksort down to runs of 16, a heapsort
    past a depth of 2 log2 n, then insertion sort); equal lengths in batches over 16 come out in its order, which
    ``sorted_indices`` and the packed data expose, so the same steps are taken here on the permutation.
    """
    if len(lengths) <= _SORT_RUN or len(np.unique(lengths)) == len(lengths):
        return np.argsort(-lengths, kind="stable")  # insertion sort alone is stable; distinct keys have one order
    keys = lengths.tolist()
    a = list(range(len(keys)))  # the permutation being sorted; compare by key

    def before(i, j):  # comp(a[i], a[j]) on positions
        return keys[a[i]] > keys[a[j]]

    def insertion_sort(first, last):
        if first == last:
            return
        for i in range(first + 1, last):
            if keys[a[i]] > keys[a[first]]:
                val = a[i]
                a[first + 1 : i + 1] = a[first:i]
                a[first] = val
            else:
                linear_insert(i)

    def linear_insert(last):
        val = a[last]
        nxt = last - 1
        while keys[val] > keys[a[nxt]]:
            a[last] = a[nxt]
            last = nxt
            nxt -= 1
        a[last] = val

    def move_median_to_first(result, x, y, z):
        if before(x, y):
            if before(y, z):
                a[result], a[y] = a[y], a[result]
            elif before(x, z):
                a[result], a[z] = a[z], a[result]
            else:
                a[result], a[x] = a[x], a[result]
        elif before(x, z):
            a[result], a[x] = a[x], a[result]
        elif before(y, z):
            a[result], a[z] = a[z], a[result]
        else:
            a[result], a[y] = a[y], a[result]

    def unguarded_partition(first, last, pivot):
        while True:
            while before(first, pivot):
                first += 1
            last -= 1
            while before(pivot, last):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def push_heap(first, hole, top, value):
        parent = (hole - 1) // 2
        while hole > top and keys[a[first + parent]] > keys[value]:
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def adjust_heap(first, hole, n, value):
        top = hole
        child = hole
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if before(first + child, first + child - 1):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        push_heap(first, hole, top, value)

    def heap_sort(first, last):
        n = last - first
        if n >= 2:
            parent = (n - 2) // 2
            while True:
                adjust_heap(first, parent, n, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, value)

    def introsort_loop(first, last, depth):
        while last - first > _SORT_RUN:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            move_median_to_first(first, first + 1, mid, last - 1)
            cut = unguarded_partition(first + 1, last, first)
            introsort_loop(cut, last, depth)
            last = cut

    n = len(a)
    if n:
        introsort_loop(0, n, (n.bit_length() - 1) * 2)
        if n > _SORT_RUN:
            insertion_sort(0, _SORT_RUN)
            for i in range(_SORT_RUN, n):
                linear_insert(i)
        else:
            insertion_sort(0, n)
    return np.array(a, dtype=np.int64)


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch of sequences of the given lengths, as ``torch.nn.utils.rnn.pack_padded_sequence``.

    ``input`` is (T, B, *) (or (B, T, *) with ``batch_first``), ``lengths`` a list or 1-D CPU tensor of B
    lengths, each in 1..T. With ``enforce_sorted`` the lengths must not increase; otherwise the batch is sorted by
    decreasing length first and ``sorted_indices`` records how. Gradients flow from ``data`` back to ``input``.

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import pack_padded_sequence
    >>> x = trainkit.tensor([[1., 4.], [2., 5.], [3., 0.]])
    >>> packed = pack_padded_sequence(x, [3, 2])
    >>> packed.data.tolist(), packed.batch_sizes.tolist()
    ([1.0, 4.0, 2.0, 5.0, 3.0], [2, 2, 1])
    """
    lengths = _lengths_array(lengths)
    order = None
    sorted_indices = None
    if not enforce_sorted:
        order = _sort_descending(lengths)
        lengths = lengths[order]
        sorted_indices = tensor(order, dtype=to_dtype("int64"), device=input.device)
        batch_dim = 0 if batch_first else 1
        if len(order) != input.size(batch_dim):  # torch selects these columns first: its errors, its result
            input = input.index_select(batch_dim, sorted_indices)
            order = None
    batch_size = input.size(0 if batch_first else 1)
    steps = input.size(1 if batch_first else 0)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if len(lengths) != batch_size:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} (batch_size={batch_size})"
        )
    if lengths[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if (lengths[1:] > lengths[:-1]).any():
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
            "you do not need ONNX exportability."
        )
    if lengths[0] > steps:
        raise RuntimeError(
            f"Expected every length to be at most the number of time steps of the input ({steps}), but got a "
            f"length of {int(lengths[0])} (input of shape {list(input.shape)}, batch_first={batch_first})"
        )
    running = np.arange(int(lengths[0]))[:, None] < lengths[None, :]
    batch_sizes = running.sum(axis=1).astype(np.int64)
    times, ranks = np.nonzero(running)  # time-major: step t of every sequence still running, in sorted order
    columns = order[ranks] if order is not None else ranks
    index = _on_device_of(input, columns, times) if batch_first else _on_device_of(input, times, columns)
    data = PackRows.apply(input, index=index)
    return PackedSequence(data, tensor(batch_sizes, dtype=to_dtype("int64")), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Unpack a PackedSequence into a padded batch and its lengths, as ``torch.nn.utils.rnn.pad_packed_sequence``.

    Returns ``(padded, lengths)``: padded is (T, B, *) (or (B, T, *) with ``batch_first``), T the longest length or
    ``total_length``, the batch in the order it had before packing; ``lengths`` an int64 CPU tensor. Positions
    past a sequence's end hold ``padding_value``. Gradients flow from ``padded`` back to ``sequence.data``.

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import pack_sequence, pad_packed_sequence
    >>> packed = pack_sequence([trainkit.tensor([1., 2.]), trainkit.tensor([3.])])
    >>> padded, lengths = pad_packed_sequence(packed, batch_first=True)
    >>> padded.tolist(), lengths.tolist()
    ([[1.0, 2.0], [3.0, 0.0]], [2, 1])
    """
    batch_sizes = np.asarray(sequence.batch_sizes.numpy(), dtype=np.int64)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    batch_size = int(batch_sizes[0]) if len(batch_sizes) else 0
    ranks_all = np.arange(batch_size)
    running = ranks_all[None, :] < batch_sizes[:, None]
    lengths = running.sum(axis=0).astype(np.int64)  # in sorted order
    times, ranks = np.nonzero(running)
    columns = ranks
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        unsorted = np.asarray(unsorted.detach().cpu().numpy(), dtype=np.int64)
        position = np.empty_like(unsorted)
        position[unsorted] = np.arange(len(unsorted))  # where sorted rank r lands in the caller's batch
        columns = position[ranks]
        lengths = lengths[unsorted]
    data = sequence.data
    rest = tuple(data.shape[1:])
    if batch_first:
        shape, index = (batch_size, steps) + rest, _on_device_of(data, columns, times)
    else:
        shape, index = (steps, batch_size) + rest, _on_device_of(data, times, columns)
    padded = PadRows.apply(data, index=index, shape=shape, padding_value=padding_value)
    return padded, tensor(lengths, dtype=to_dtype("int64"))


def _copy_shape_error(target: tuple, source: tuple) -> RuntimeError | None:
    """torch's error for copying a tensor of shape ``source`` into one of shape ``target``, or None if it can."""
    n = max(len(target), len(source))
    broadcast = []
    for offset in range(n, 0, -1):
        a = target[-offset] if offset <= len(target) else 1
        b = source[-offset] if offset <= len(source) else 1
        if a != b and a != 1 and b != 1:
            return RuntimeError(
                f"The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension "
                f"{n - offset}"
            )
        broadcast.append(max(a, b) if a != 1 and b != 1 else a * b)
    if tuple(broadcast) != tuple(target):
        return RuntimeError(f"output with shape {list(target)} doesn't match the broadcast shape {broadcast}")
    return None


def pad_sequence(
    sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stack sequences of different lengths into one padded tensor, as ``torch.nn.utils.rnn.pad_sequence``.

    Each sequence is (L_i, *); the result is (max L_i, B, *) (or (B, max L_i, *) with ``batch_first``), with the
    dtype and device of the first sequence, and ``padding_value`` after each sequence (before it with
    ``padding_side='left'``). Gradients flow back to every sequence.

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import pad_sequence
    >>> pad_sequence([trainkit.tensor([1., 2.]), trainkit.tensor([3.])], batch_first=True, padding_value=-1).tolist()
    [[1.0, 2.0], [3.0, -1.0]]
    """
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    first = sequences[0]
    if any(s.dim() == 0 for s in sequences):
        raise RuntimeError("pad_sequence: every sequence needs at least one dimension (its length), got a 0-d tensor")
    lengths = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    longest = int(lengths.max())
    rest = tuple(first.shape[1:])
    parts = []
    for s in sequences:
        target = (s.shape[0],) + rest
        if tuple(s.shape) != target:
            error = _copy_shape_error(target, tuple(s.shape))
            if error is not None:
                raise error
            s = s.expand(target)
        parts.append(s.to(device=first.device, dtype=first.dtype))
    data = cat(parts) if len(parts) > 1 else parts[0]
    batch = np.repeat(np.arange(len(sequences)), lengths)
    starts = np.cumsum(lengths) - lengths
    times = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
    if padding_side == "left":
        times = times + np.repeat(longest - lengths, lengths)
    if batch_first:
        shape, index = (len(sequences), longest) + rest, _on_device_of(data, batch, times)
    else:
        shape, index = (longest, len(sequences)) + rest, _on_device_of(data, times, batch)
    return PadRows.apply(data, index=index, shape=shape, padding_value=padding_value)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of different lengths, as ``torch.nn.utils.rnn.pack_sequence``.

    Each sequence is (L_i, *); with ``enforce_sorted`` the lengths must not increase, otherwise the batch is sorted
    by length and ``sorted_indices`` records how.

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import pack_sequence
    >>> pack_sequence([trainkit.tensor([1., 2., 3.]), trainkit.tensor([4., 5.])]).data.tolist()
    [1.0, 4.0, 2.0, 5.0, 3.0]
    """
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences, as ``torch.nn.utils.rnn.unpad_sequence``.

    ``padded_sequences`` is (T, B, *) (or (B, T, *) with ``batch_first``) and ``lengths`` a tensor of B lengths;
    the result is the list of B tensors (L_i, *). Unlike torch, the input keeps its layout (torch transposes a
    time-major input in place).

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import unpad_sequence
    >>> x = trainkit.tensor([[1., 2., 3.], [4., 5., 0.]])
    >>> [s.tolist() for s in unpad_sequence(x, trainkit.tensor([3, 2]), batch_first=True)]
    [[1.0, 2.0, 3.0], [4.0, 5.0]]
    """
    if not batch_first:
        if padded_sequences.requires_grad and padded_sequences.grad_fn is None and grad_mode.is_grad_enabled():
            # torch transposes the input in place here, which autograd refuses for a leaf that requires grad
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        padded_sequences = padded_sequences.transpose(0, 1)
    steps = arange(padded_sequences.shape[1], device=lengths.device)
    return [seq[steps < length] for seq, length in zip(padded_sequences, lengths)]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """Split a PackedSequence back into its list of sequences, as ``torch.nn.utils.rnn.unpack_sequence``.

    >>> import trainkit
    >>> from trainkit.nn.utils.rnn import pack_sequence, unpack_sequence
    >>> packed = pack_sequence([trainkit.tensor([1., 2.]), trainkit.tensor([3., 4., 5.])], enforce_sorted=False)
    >>> [s.tolist() for s in unpack_sequence(packed)]
    [[1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    padded_sequences, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded_sequences, lengths, batch_first=True)
