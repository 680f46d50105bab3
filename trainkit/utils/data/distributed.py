"""``trainkit.utils.data.distributed`` (``torch.utils.data.distributed``): ``DistributedSampler`` under PyTorch's path.

>>> import trainkit
>>> from trainkit.utils.data.distributed import DistributedSampler
>>> DistributedSampler is trainkit.distributed.DistributedSampler
True
"""

from ...distributed.sampler import DistributedSampler

__all__ = ["DistributedSampler"]
