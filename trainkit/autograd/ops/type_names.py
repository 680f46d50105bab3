"""PyTorch's names of dtypes in its error messages: 'Float', 'Long', ... and the legacy 'torch.FloatTensor'."""

from __future__ import annotations

import numpy as np

from ..backend import SCALAR_NAMES
from ..tensor import Tensor

__all__ = ["legacy_type_name", "scalar_name"]


def scalar_name(value) -> str:
    """PyTorch's name of a dtype, or of a tensor's dtype ('Float', 'Int', ...)."""
    name = np.dtype(value._data.dtype if isinstance(value, Tensor) else value).name
    return SCALAR_NAMES.get(name, name)


def legacy_type_name(t: Tensor) -> str:
    """PyTorch's legacy type name of a tensor ('torch.FloatTensor'), which its dtype-mismatch errors quote."""
    return f"torch.{'cuda.' if t.is_cuda else ''}{scalar_name(t)}Tensor"
