"""Datasets and batching, as ``torch.utils.data``, plus file loaders and small generated datasets.

>>> import trainkit
>>> from trainkit.data import DataLoader, regression_curve
>>> loader = DataLoader(regression_curve(10, seed=0), batch_size=4, shuffle=True)
>>> [len(x) for x, y in loader]
[4, 4, 2]
"""

from .dataloader import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
    default_collate,
)
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, as_tensor, random_split
from .digits import digits
from .files import MissingDataError, classes_of, load_classes, load_csv, load_npz, save_classes
from .synthetic import regression_curve
from .text import TextDataError, TextDataset, Vocabulary, load_text, vocabulary_of

__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "MissingDataError",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "Subset",
    "TensorDataset",
    "TextDataError",
    "TextDataset",
    "Vocabulary",
    "WeightedRandomSampler",
    "as_tensor",
    "classes_of",
    "default_collate",
    "digits",
    "load_classes",
    "load_csv",
    "load_npz",
    "load_text",
    "random_split",
    "regression_curve",
    "save_classes",
    "vocabulary_of",
]
