"""``trainkit.nn.modules.distance`` (``torch.nn.modules.distance``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.distance import CosineSimilarity
>>> CosineSimilarity is trainkit.nn.CosineSimilarity
True
"""

from ...layers import CosineSimilarity

__all__ = ["CosineSimilarity"]
