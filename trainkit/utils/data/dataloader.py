"""``trainkit.utils.data.dataloader`` (``torch.utils.data.dataloader``): ``DataLoader`` and ``default_collate``
under PyTorch's path.

>>> import trainkit
>>> from trainkit.utils.data.dataloader import DataLoader
>>> DataLoader is trainkit.data.DataLoader
True
"""

from ...data.dataloader import DataLoader, default_collate

__all__ = ["DataLoader", "default_collate"]
