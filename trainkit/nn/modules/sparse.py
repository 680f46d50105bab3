"""``trainkit.nn.modules.sparse`` (``torch.nn.modules.sparse``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.sparse import Embedding
>>> Embedding is trainkit.nn.Embedding
True
"""

from ...layers import Embedding

__all__ = ["Embedding"]
