"""trainkit.layers (also ``trainkit.nn``): Module, Parameter, layers and losses."""

from . import init
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, ConvTranspose2d, MaxPool2d
from .conv1d import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AvgPool1d, Conv1d, ConvTranspose1d, MaxPool1d
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
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cells import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .sparse import Embedding
from .summary import summary
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveMaxPool1d",
    "AvgPool1d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "Buffer",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Embedding",
    "Flatten",
    "GELU",
    "GroupNorm",
    "GRU",
    "GRUCell",
    "HuberLoss",
    "Identity",
    "init",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "LSTM",
    "LSTMCell",
    "MaxPool1d",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MSELoss",
    "MultiheadAttention",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "RNN",
    "RNNBase",
    "RNNCell",
    "RNNCellBase",
    "Sequential",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "summary",
    "Tanh",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "Unflatten",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]
