"""``trainkit.nn.modules.loss`` (``torch.nn.modules.loss``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.loss import BCELoss
>>> BCELoss is trainkit.nn.BCELoss
True
"""

from ...layers import (
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
from ...layers.loss import _Loss, _WeightedLoss

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
    "_Loss",
    "_WeightedLoss",
]
