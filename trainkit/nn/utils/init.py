"""``trainkit.nn.utils.init`` (``torch.nn.utils.init``): ``skip_init``.

>>> from trainkit import nn
>>> tuple(skip_init(nn.Linear, 5, 1).weight.shape)
(1, 5)
"""

from __future__ import annotations

import inspect

from ...layers.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args, **kwargs) -> Module:
    """An instance of ``module_cls(*args, **kwargs)`` whose parameters and buffers are to be overwritten by the
    caller (PyTorch leaves them uninitialised; here they hold the class's default initial values, which costs
    the same as building the layer). The class must take a ``device`` argument, as PyTorch requires.

    >>> from trainkit import nn
    >>> skip_init(nn.ReLU)
    Traceback (most recent call last):
    ...
    RuntimeError: Module must support a 'device' arg to skip initialization
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs.setdefault("device", "cpu")
    return module_cls(*args, **kwargs)
