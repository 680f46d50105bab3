"""Averaging gradients over ranks in buckets: one Allreduce for many small parameters, not one each.

After ``backward`` each rank holds the gradient of its own shard of the batch. ``GradientReducer.reduce()`` copies
the trainable parameters' grads into a few flat buffers (of at most ``bucket_cap_mb`` each, one dtype and device
per buffer), sums every buffer over the ranks, scales by 1 / world size and copies the averages back, so that
every rank then takes the same optimizer step. With equal shards, the average equals the gradient of the whole
batch's mean loss.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..autograd.backend import xp_of
from ..autograd.tensor import Tensor
from .comm import ReduceOp, World, world


class _Bucket:
    """Parameters whose grads travel together in one flat buffer."""

    def __init__(self, params: list[Tensor]):
        self.params = params
        first = params[0]._data
        self.buffer = xp_of(first).empty(sum(p.numel() for p in params), dtype=first.dtype)
        self.slices = []
        offset = 0
        for p in params:
            self.slices.append(slice(offset, offset + p.numel()))
            offset += p.numel()


class GradientReducer:
    """Average the ``.grad`` of ``params`` over the ranks of ``group`` (default: this process's world).

    ``reduce(weight)`` scales this rank's grads before the sum (the Trainer instead scales each rank's loss by its
    share of the batch when the shares differ, which comes to the same).

    >>> import trainkit
    >>> w = trainkit.nn.Parameter(trainkit.ones(3))
    >>> (w * 2).sum().backward()
    >>> GradientReducer([w]).reduce()
    >>> w.grad
    tensor([2., 2., 2.])
    """

    def __init__(self, params: Iterable[Tensor], bucket_cap_mb: float = 25.0, group: World | None = None):
        self.all_params = list(params)
        self.bucket_cap_bytes = int(bucket_cap_mb * 1024 * 1024)
        self.group = group if group is not None else world()
        self._layout: tuple | None = None
        self.buckets: list[_Bucket] = []

    def _build(self) -> None:
        """Group the trainable parameters into buckets (again whenever which ones train has changed)."""
        trainable = [p for p in self.all_params if p.requires_grad]
        layout = tuple(id(p) for p in trainable)
        if layout == self._layout:
            return
        self._layout = layout
        self.buckets = []
        current: list[Tensor] = []
        size = 0
        for p in trainable:
            nbytes = p.numel() * p._data.dtype.itemsize
            same_kind = not current or (
                p._data.dtype == current[0]._data.dtype and xp_of(p._data) is xp_of(current[0]._data)
            )
            if current and (not same_kind or size + nbytes > self.bucket_cap_bytes):
                self.buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            self.buckets.append(_Bucket(current))

    def reduce(self, weight: float = 1.0) -> None:
        """Replace every trainable parameter's grad by its average over the ranks, where a rank without a grad
        counts as 0; a parameter that no rank has a grad for keeps ``grad = None`` (so the optimizer skips it, as
        it would in one process).

        Every rank must call this at the same point with the same parameters: it is a collective.
        """
        self._build()
        if self.group.size == 1 and weight == 1.0:
            return
        params = [p for bucket in self.buckets for p in bucket.params]
        has_grad = np.array([p.grad is not None for p in params], dtype=np.int32)
        self.group.allreduce(has_grad, ReduceOp.MAX)
        scale = 1.0 / self.group.size
        i = 0
        for bucket in self.buckets:
            buf = bucket.buffer
            for p, part in zip(bucket.params, bucket.slices):
                if p.grad is None:
                    buf[part] = 0
                else:
                    buf[part] = p.grad._data.reshape(-1)
            if weight != 1.0:
                buf *= buf.dtype.type(weight)
            self.group.allreduce(buf)
            if scale != 1.0:
                buf *= buf.dtype.type(scale)
            for p, part in zip(bucket.params, bucket.slices):
                i += 1
                if not has_grad[i - 1]:
                    continue
                average = buf[part].reshape(p._data.shape)
                if p.grad is None or not getattr(p.grad._data.flags, "writeable", True):  # CuPy: no such flag
                    p.grad = Tensor._make(average.copy())
                else:
                    p.grad._data[...] = average

    def broadcast_parameters(self, module_or_tensors, src: int = 0) -> None:
        """Give every rank rank ``src``'s parameters and buffers (of a Module, or a list of tensors), in place."""
        tensors = (
            list(module_or_tensors.parameters()) + [b for b in module_or_tensors.buffers() if b is not None]
            if hasattr(module_or_tensors, "parameters")
            else list(module_or_tensors)
        )
        broadcast_tensors(tensors, src, self.group)


def broadcast_tensors(tensors: list[Tensor], src: int = 0, group: World | None = None) -> None:
    """Overwrite each tensor's values with rank ``src``'s, in place, one broadcast per dtype and device.

    >>> import trainkit
    >>> t = trainkit.ones(2)
    >>> broadcast_tensors([t]); t
    tensor([1., 1.])
    """
    group = group if group is not None else world()
    if group.size == 1:
        return
    groups: dict = {}
    for t in tensors:
        groups.setdefault((t._data.dtype, xp_of(t._data)), []).append(t)
    for (_dtype, xp), members in groups.items():
        flat = xp.concatenate([t._data.reshape(-1) for t in members])
        group.broadcast(flat, src)
        offset = 0
        for t in members:
            n = t._data.size
            t._data[...] = flat[offset : offset + n].reshape(t._data.shape)
            offset += n
