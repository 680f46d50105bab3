"""``trainkit.nn.modules.batchnorm`` (``torch.nn.modules.batchnorm``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.batchnorm import BatchNorm1d
>>> BatchNorm1d is trainkit.nn.BatchNorm1d
True
"""

from ...layers import BatchNorm1d, BatchNorm2d

__all__ = ["BatchNorm1d", "BatchNorm2d"]
