"""``trainkit.nn.functional`` (PyTorch's ``F``): the functional forms of the layers and losses, one module per
family, on the autograd core. relu, sigmoid, tanh, softmax and log_softmax are the core's tensor
functions (``activation`` adds ``inplace`` and the legacy implicit ``dim``).
"""

from . import attention, conv1d, pooling1d, rnn
from .activation import gelu, leaky_relu, log_softmax, relu, sigmoid, softmax, softplus, tanh
from .attention import *  # noqa: F403
from .conv import conv2d, fold, unfold
from .conv1d import *  # noqa: F403
from .conv_transpose import conv_transpose2d
from .dropout import dropout, dropout1d, dropout2d, dropout3d
from .interpolate import interpolate, upsample, upsample_bilinear, upsample_nearest
from .linear import linear
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .normalization import batch_norm, group_norm, layer_norm
from .padding import pad
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from .pooling1d import *  # noqa: F403
from .sparse import embedding, one_hot

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "conv2d", "conv_transpose2d", "cross_entropy", "dropout", "dropout1d", "dropout2d", "dropout3d", "embedding",
    "fold", "gelu", "group_norm", "huber_loss", "interpolate", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "log_softmax", "max_pool2d", "mse_loss", "nll_loss", "one_hot", "pad", "relu", "sigmoid",
    "smooth_l1_loss", "softmax", "softplus", "tanh", "unfold", "upsample", "upsample_bilinear", "upsample_nearest",
]
__all__ += attention.__all__ + conv1d.__all__ + pooling1d.__all__
