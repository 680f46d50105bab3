"""``trainkit.nn.modules.dropout`` (``torch.nn.modules.dropout``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.dropout import Dropout
>>> Dropout is trainkit.nn.Dropout
True

``_DropoutNd`` is the base class of the dropout layers (``p`` and ``inplace``), private in PyTorch too:

>>> from trainkit.nn.modules.dropout import _DropoutNd
>>> isinstance(trainkit.nn.Dropout(0.1), _DropoutNd)
True
"""

from ...layers import Dropout, Dropout1d, Dropout2d, Dropout3d
from ...layers.dropout import _DropoutNd

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "_DropoutNd"]
