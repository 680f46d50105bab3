"""``trainkit.utils.data.sampler`` (``torch.utils.data.sampler``): the samplers under PyTorch's path.

>>> import trainkit
>>> from trainkit.utils.data.sampler import RandomSampler
>>> RandomSampler is trainkit.data.RandomSampler
True
"""

from ...data.dataloader import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]
