"""The functional forms of the layers and losses (``trainkit.nn.functional``, PyTorch's ``F``)."""

from ..autograd.ops.activation import logsumexp, sigmoid, tanh
from ..autograd.ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, fold, max_pool2d, unfold
from ..autograd.ops.conv_transpose import conv_transpose2d
from ..autograd.ops.elementwise import softplus
from ..autograd.ops.interpolate import interpolate, upsample, upsample_bilinear, upsample_nearest
from ..autograd.ops.nn import (
    batch_norm,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    dropout,
    embedding,
    gelu,
    huber_loss,
    l1_loss,
    leaky_relu,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    relu,
    smooth_l1_loss,
    softmax,
)
from ..autograd.ops.normalization import dropout1d, dropout2d, dropout3d, group_norm, layer_norm
from ..autograd.ops.padding import one_hot, pad

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "conv2d", "conv_transpose2d", "cross_entropy", "dropout", "dropout1d", "dropout2d", "dropout3d", "embedding",
    "fold", "gelu",
    "group_norm", "huber_loss", "interpolate", "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax",
    "logsumexp", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad", "relu", "sigmoid", "smooth_l1_loss",
    "softmax", "softplus", "tanh", "unfold", "upsample", "upsample_bilinear", "upsample_nearest",
]
