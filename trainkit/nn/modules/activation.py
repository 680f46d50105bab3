"""``trainkit.nn.modules.activation`` (``torch.nn.modules.activation``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.activation import ELU
>>> ELU is trainkit.nn.ELU
True
"""

from ...layers import (
    ELU,
    GELU,
    Hardswish,
    LeakyReLU,
    LogSoftmax,
    Mish,
    MultiheadAttention,
    PReLU,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)

__all__ = [
    "ELU",
    "GELU",
    "Hardswish",
    "LeakyReLU",
    "LogSoftmax",
    "Mish",
    "MultiheadAttention",
    "PReLU",
    "ReLU",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "Softplus",
    "Tanh",
]
