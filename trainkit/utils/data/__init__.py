"""``trainkit.utils.data`` (``torch.utils.data``): PyTorch's name for ``trainkit.data``, with PyTorch's submodules
``dataset``, ``dataloader``, ``sampler`` and ``distributed`` (the same objects under each path).

>>> import trainkit
>>> from trainkit.utils.data import DataLoader
>>> from trainkit.utils.data.dataloader import DataLoader as Loader
>>> DataLoader is Loader is trainkit.data.DataLoader
True
"""

from ...data import *  # noqa: F403
from ...data import __all__ as data_names
from ...distributed.sampler import DistributedSampler
from . import dataloader, dataset, distributed, sampler

__all__ = [*data_names, "DistributedSampler"]
