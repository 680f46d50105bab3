"""``trainkit.testing`` (``torch.testing``): ``assert_close`` with PyTorch's tolerances and messages.

>>> import trainkit
>>> trainkit.testing.assert_close(trainkit.tensor([1.0, 2.0]), trainkit.tensor([1.0, 2.0 + 1e-7]))
"""

from .comparison import assert_close, default_tolerances

__all__ = ["assert_close", "default_tolerances"]
