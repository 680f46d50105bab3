"""``trainkit.utils.data.dataset`` (``torch.utils.data.dataset``): the map-style datasets under PyTorch's path.

>>> import trainkit
>>> from trainkit.utils.data.dataset import TensorDataset
>>> TensorDataset is trainkit.data.TensorDataset
True
"""

from ...data.dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split

__all__ = ["ConcatDataset", "Dataset", "Subset", "TensorDataset", "random_split"]
