"""trainkit.layers (also ``trainkit.nn``): Module, Parameter, layers and losses."""

from . import attention, conv1d, init, rnn, rnn_cells, rnn_utils, transformer
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .attention import *  # noqa: F403
from .container import ModuleDict, ModuleList, Sequential
from .conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, ConvTranspose2d, MaxPool2d
from .conv1d import *  # noqa: F403
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .linear import Flatten, Identity, Linear, Unflatten
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .parameter import Buffer, Parameter
from .rnn import *  # noqa: F403
from .rnn_cells import *  # noqa: F403
from .sparse import Embedding
from .summary import summary
from .transformer import *  # noqa: F403
from .upsample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Buffer",
    "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "Embedding",
    "Flatten",
    "GELU", "GroupNorm", "HuberLoss", "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax",
    "MSELoss", "MaxPool2d", "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter", "ReLU", "Sequential",
    "Sigmoid", "SmoothL1Loss", "Softmax", "Tanh", "Unflatten", "Upsample", "UpsamplingBilinear2d",
    "UpsamplingNearest2d", "init", "summary",
]
__all__ += attention.__all__ + conv1d.__all__ + rnn.__all__ + rnn_cells.__all__ + transformer.__all__
