"""``trainkit.nn.modules.dropout`` (``torch.nn.modules.dropout``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.dropout import Dropout
>>> Dropout is trainkit.nn.Dropout
True
"""

from ...layers import Dropout, Dropout1d, Dropout2d, Dropout3d

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]
