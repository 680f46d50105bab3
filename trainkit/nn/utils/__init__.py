"""``trainkit.nn.utils`` (``torch.nn.utils``): gradient clipping, ``rnn`` (packed and padded sequences),
``parametrize`` and ``parametrizations`` (weight and spectral norm as parametrizations), the older hook-based
``weight_norm`` and ``spectral_norm``, ``stateless.functional_call``, ``fusion``, ``parameters_to_vector`` and
``skip_init``; ``clip_grad`` is PyTorch's module path of the clipping functions."""

from ...layers.clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from . import clip_grad, convert_parameters, fusion, init, parametrizations, parametrize, rnn, stateless
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .init import skip_init
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "clip_grad",
    "convert_parameters",
    "fusion",
    "init",
    "parametrizations",
    "parametrize",
    "rnn",
    "stateless",
    "parameters_to_vector",
    "vector_to_parameters",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "skip_init",
    "remove_spectral_norm",
    "spectral_norm",
    "remove_weight_norm",
    "weight_norm",
]
