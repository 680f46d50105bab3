"""``trainkit.utils``: PyTorch's home for ``data`` (``from trainkit.utils.data import DataLoader``) and
``checkpoint`` (activation checkpointing)."""

from . import checkpoint, data  # noqa: F401
