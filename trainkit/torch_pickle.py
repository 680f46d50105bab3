"""The older name of :mod:`trainkit.serialization.torch_pickle`, kept because ``from trainkit.torch_pickle import
load_torch_file`` was the documented way to read a ``.pt`` file; new code imports it from ``trainkit.serialization``.

>>> from trainkit.torch_pickle import load_torch_file
>>> load_torch_file.__module__
'trainkit.serialization.torch_pickle'
"""

from .serialization.torch_pickle import TorchFileError, UnsafeGlobalError, load_torch_file

__all__ = ["TorchFileError", "UnsafeGlobalError", "load_torch_file"]
