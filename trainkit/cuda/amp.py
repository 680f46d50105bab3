"""``trainkit.cuda.amp`` (``torch.cuda.amp``): PyTorch's older names of ``autocast('cuda')`` and
``GradScaler('cuda')``, deprecated there and here: each warns with a FutureWarning naming the call to use instead.

>>> import trainkit, warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     GradScaler().is_enabled() == trainkit.cuda.is_available()  # without a GPU: disabled, as in PyTorch
True
"""

from __future__ import annotations

import warnings

from ..amp import autocast_mode, grad_scaler
from ..autograd.backend import dtype, float16

__all__ = ["GradScaler", "autocast"]


class autocast(autocast_mode.autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``: deprecated, use
    ``trainkit.amp.autocast('cuda', ...)``."""

    def __init__(self, enabled: bool = True, dtype: dtype = float16, cache_enabled: bool = True):
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. "
            "Please use `torch.amp.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True)``: deprecated, use ``trainkit.amp.GradScaler('cuda', ...)``."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. "
            "Please use `torch.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
