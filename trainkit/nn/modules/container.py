"""``trainkit.nn.modules.container`` (``torch.nn.modules.container``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.container import ModuleDict
>>> ModuleDict is trainkit.nn.ModuleDict
True
"""

from ...layers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]
