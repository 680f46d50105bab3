"""``trainkit.nn.utils.fusion`` (``torch.nn.utils.fusion``): fold an evaluation-mode BatchNorm into the
convolution or linear layer before it, so that inference runs one layer instead of two.

With ``s = γ / √(running_var + eps)``: ``W' = W · s`` per output channel, ``b' = (b − running_mean) · s + β``.

>>> from trainkit import nn
>>> conv, bn = nn.Conv2d(3, 4, 3).eval(), nn.BatchNorm2d(4).eval()
>>> fused = fuse_conv_bn_eval(conv, bn)
>>> tuple(fused.weight.shape), fused is conv
((4, 3, 3, 3), False)
"""

from __future__ import annotations

import copy

from ...autograd.creation import ones_like, zeros_like
from ...autograd.tensor import Tensor
from ...layers.module import Module
from ...layers.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv: Module, bn: Module, transpose: bool = False) -> Module:
    """A copy of ``conv`` (in eval mode) that computes ``bn(conv(x))`` for ``bn`` in eval mode.

    >>> from trainkit import nn
    >>> fuse_conv_bn_eval(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2))
    Traceback (most recent call last):
    ...
    AssertionError: Fusion only for eval!
    """
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple[Parameter, Parameter]:
    """The fused convolution's weight and bias (output channels on dimension 1 of the weight with ``transpose``).

    >>> import trainkit
    >>> w, b = fuse_conv_bn_weights(trainkit.ones(1, 1, 1, 1), None, trainkit.zeros(1), trainkit.full((1,), 3.0),
    ...                             1.0, None, None)
    >>> w.flatten().tolist(), b.tolist()
    ([0.5], [0.0])
    """
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(weight_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(bias_dtype)
    return Parameter(fused_w.detach(), conv_w.requires_grad), Parameter(fused_b.detach(), conv_b.requires_grad)


def fuse_linear_bn_eval(linear: Module, bn: Module) -> Module:
    """A copy of ``linear`` (in eval mode) that computes ``bn(linear(x))`` for ``bn`` in eval mode.

    >>> from trainkit import nn
    >>> fused = fuse_linear_bn_eval(nn.Linear(3, 2).eval(), nn.BatchNorm1d(2).eval())
    >>> tuple(fused.weight.shape)
    (2, 3)
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused


def fuse_linear_bn_weights(
    linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float, bn_w: Tensor, bn_b: Tensor
) -> tuple[Parameter, Parameter]:
    """The fused linear layer's weight and bias.

    >>> import trainkit
    >>> w, b = fuse_linear_bn_weights(trainkit.ones(1, 1), None, trainkit.zeros(1), trainkit.full((1,), 3.0), 1.0,
    ...                               trainkit.ones(1), trainkit.ones(1))
    >>> w.tolist(), b.tolist()
    ([[0.5]], [1.0])
    """
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(weight_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(bias_dtype)
    return Parameter(fused_w.detach(), linear_w.requires_grad), Parameter(fused_b.detach(), linear_b.requires_grad)
