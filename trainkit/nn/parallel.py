"""``trainkit.nn.parallel``: where PyTorch keeps ``DistributedDataParallel`` (it lives in ``trainkit.distributed``)."""

from ..distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
