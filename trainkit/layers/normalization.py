"""Batch normalisation layers: BatchNorm1d for (N, C) and (N, C, L) inputs, BatchNorm2d for (N, C, H, W)."""

from __future__ import annotations

from ..autograd.backend import int64
from ..autograd.creation import empty, ones, tensor, zeros
from ..autograd.ops import nn as F
from ..autograd.tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter


class _BatchNorm(Module):
    """Normalise each channel with the batch's statistics in training and the running ones in evaluation.

    Buffers: ``running_mean`` and ``running_var`` (updated in training as
    running = (1 - momentum) * running + momentum * batch; ``momentum=None`` averages all batches seen so far) and
    ``num_batches_tracked``. Without ``track_running_stats`` there are none and the batch's statistics are always
    used. With ``affine``, learnable ``weight`` (ones) and ``bias`` (zeros; left out with ``bias=False``) scale and
    shift the result.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average: batch k counts 1/k
                factor = 1.0 / float(self.num_batches_tracked)
        # batch statistics in training, and in evaluation when there are no running ones
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        # running statistics are passed only to be updated (training, tracked) or to normalise (evaluation)
        pass_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if pass_running else None,
            self.running_var if pass_running else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs, per channel C.

    >>> import trainkit
    >>> bn = BatchNorm1d(2)
    >>> bn(trainkit.tensor([[0.0, 1.0], [2.0, 5.0]]))
    tensor([[-1.0000, -1.0000],
            [ 1.0000,  1.0000]], grad_fn=<NativeBatchNormBackward0>)
    >>> bn.running_mean, bn.num_batches_tracked
    (tensor([0.1000, 0.3000]), tensor(1))
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs, per channel C."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")
