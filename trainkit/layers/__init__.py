"""trainkit.layers (also ``trainkit.nn``): Module, Parameter, layers and losses."""

from . import init
from .activation import (
    ELU,
    GELU,
    Hardswish,
    LeakyReLU,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, ConvTranspose2d, MaxPool2d
from .conv1d import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AvgPool1d, Conv1d, ConvTranspose1d, MaxPool1d
from .distance import CosineSimilarity
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .linear import Flatten, Identity, Linear, Unflatten
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
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
    "CosineSimilarity",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "ELU",
    "Embedding",
    "Flatten",
    "GELU",
    "GroupNorm",
    "GRU",
    "GRUCell",
    "Hardswish",
    "HuberLoss",
    "Identity",
    "init",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "LSTM",
    "LSTMCell",
    "MaxPool1d",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MSELoss",
    "MultiheadAttention",
    "NLLLoss",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "PReLU",
    "ReLU",
    "RNN",
    "RNNBase",
    "RNNCell",
    "RNNCellBase",
    "Sequential",
    "Sigmoid",
    "SiLU",
    "SmoothL1Loss",
    "Softmax",
    "Softplus",
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
