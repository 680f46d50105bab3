"""``trainkit.nn.modules.batchnorm`` (``torch.nn.modules.batchnorm``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.batchnorm import BatchNorm1d
>>> BatchNorm1d is trainkit.nn.BatchNorm1d
True

``_BatchNorm`` is the base class of the batch-norm layers, private in PyTorch too; programs subclass it and test
``isinstance(m, _BatchNorm)`` to find every batch-norm layer:

>>> from trainkit.nn.modules.batchnorm import _BatchNorm
>>> isinstance(trainkit.nn.BatchNorm2d(3), _BatchNorm)
True
"""

from ...layers import BatchNorm1d, BatchNorm2d
from ...layers.normalization import _BatchNorm

__all__ = ["BatchNorm1d", "BatchNorm2d", "_BatchNorm"]
