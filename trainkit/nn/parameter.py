"""``trainkit.nn.parameter`` (``torch.nn.parameter``): ``Parameter`` and ``Buffer`` under PyTorch's module path.

>>> import trainkit
>>> from trainkit.nn.parameter import Parameter
>>> Parameter is trainkit.nn.Parameter
True
"""

from ..layers.parameter import Buffer, Parameter

__all__ = ["Buffer", "Parameter"]
