"""``trainkit.utils``: PyTorch's home for ``data`` (``from trainkit.utils.data import DataLoader``)."""

from . import data  # noqa: F401
