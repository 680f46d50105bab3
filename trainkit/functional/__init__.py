"""``trainkit.nn.functional`` (PyTorch's ``F``): the functional forms of the layers and losses, one module per
family, on the autograd core. relu, sigmoid, tanh, softmax and log_softmax are the core's tensor
functions (``activation`` adds ``inplace`` and the legacy implicit ``dim``).
"""

from .activation import gelu, leaky_relu, log_softmax, relu, sigmoid, softmax, softplus, tanh
from .attention import scaled_dot_product_attention
from .conv import conv2d, fold, unfold
from .conv1d import conv1d, conv_transpose1d
from .conv_transpose import conv_transpose2d
from .dropout import dropout, dropout1d, dropout2d, dropout3d
from .interpolate import interpolate, upsample, upsample_bilinear, upsample_nearest
from .linear import linear
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from .multi_head_attention import multi_head_attention_forward
from .normalization import batch_norm, group_norm, layer_norm
from .padding import pad
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from .pooling1d import (
    adaptive_avg_pool1d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    avg_pool1d,
    max_pool1d,
    max_pool1d_with_indices,
)
from .rectifiers import elu, prelu
from .self_gated import hardswish, mish, silu
from .similarity import cosine_similarity, normalize
from .sparse import embedding, one_hot

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "embedding",
    "fold",
    "gelu",
    "group_norm",
    "hardswish",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "mish",
    "mse_loss",
    "multi_head_attention_forward",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "prelu",
    "relu",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]
