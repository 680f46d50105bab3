"""``trainkit.autocast`` (= ``trainkit.amp.autocast``): mixed precision as PyTorch's autocast does it.

Inside the block (or the decorated function) the ops of autocast's policy (``trainkit.autograd.autocast.POLICY``)
cast their floating inputs: products, convolutions, attention and the LSTM/RNN layers to the autocast dtype
(bfloat16 on the CPU unless ``dtype`` says float16; float16 on a GPU), losses to float32. Everything else runs in
the dtype of its inputs, with the usual promotion. The casts are recorded in the graph, so ``backward`` gives
float32 parameters float32 gradients.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..autograd import autocast as core
from ..autograd.backend import bfloat16, cuda_is_available, device, dtype, float16, to_dtype

__all__ = [
    "autocast",
    "clear_autocast_cache",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_cache_enabled",
    "is_autocast_enabled",
    "set_autocast_cache_enabled",
    "set_autocast_dtype",
    "set_autocast_enabled",
]

CUDA_UNAVAILABLE = "CUDA is not available or torch_xla is imported. Disabling autocast."


def _device_type(device_type: Any) -> str:
    """The device type PyTorch's autocast functions take: 'cpu' or 'cuda' (a string; other names are refused)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return device(device_type).type  # 'cuda:0' is 'cuda'; an unknown name gets device()'s error


def is_autocast_available(device_type: str) -> bool:
    """True for the device types autocast works on here: 'cpu', and 'cuda' (with or without a GPU, as PyTorch).

    >>> is_autocast_available("cpu")
    True
    """
    return _device_type(device_type) in ("cpu", "cuda")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread; without one, for CUDA, as in PyTorch.

    >>> is_autocast_enabled("cpu")
    False
    >>> with autocast("cpu"):
    ...     is_autocast_enabled("cpu"), is_autocast_enabled()
    (True, False)
    """
    return core.state.enabled[_device_type("cuda" if device_type is None else device_type)]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Turn autocast on or off for ``device_type`` in this thread (what ``autocast`` does on entering and leaving).

    >>> set_autocast_enabled("cpu", False)
    """
    kind = _device_type(device_type)
    st = core.state
    st.enabled[kind] = bool(enabled)
    if any(st.enabled.values()):
        core.enabled_threads.add(threading.get_ident())
    else:
        core.enabled_threads.discard(threading.get_ident())


def get_autocast_dtype(device_type: str) -> dtype:
    """The dtype autocast casts to on ``device_type``: bfloat16 on the CPU and float16 on CUDA unless changed.

    >>> get_autocast_dtype("cpu"), get_autocast_dtype("cuda")
    (trainkit.bfloat16, trainkit.float16)
    """
    return to_dtype(core.state.dtype[_device_type(device_type)])


def set_autocast_dtype(device_type: str, dtype: dtype) -> None:
    """Make ``dtype`` (bfloat16 or float16) autocast's lower precision on ``device_type`` in this thread.

    >>> set_autocast_dtype("cpu", bfloat16)
    """
    core.state.dtype[_device_type(device_type)] = to_dtype(dtype).np


def is_autocast_cache_enabled() -> bool:
    """Whether autocast keeps one cast of each float32 weight per region (True unless turned off).

    >>> is_autocast_cache_enabled()
    True
    """
    return core.state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn autocast's cache of weight casts on or off in this thread.

    >>> set_autocast_cache_enabled(True)
    """
    core.state.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop the casts of weights autocast kept (leaving the outermost autocast block does it).

    >>> clear_autocast_cache()
    """
    core.clear_cache()


class autocast:
    """Run the block, or the decorated function, with autocast: ``autocast(device_type, dtype=None, enabled=True,
    cache_enabled=None)``, as ``torch.autocast``. ``dtype`` None is ``get_autocast_dtype(device_type)``; on the CPU
    it may be bfloat16 or float16 (another dtype warns and disables the block, as PyTorch does); 'cuda' without a
    GPU warns and disables it. ``enabled=False`` turns autocast off inside an autocast block. The state is per
    thread.

    >>> import trainkit
    >>> layer = trainkit.nn.Linear(3, 2)
    >>> with trainkit.autocast("cpu"):
    ...     out = layer(trainkit.ones(4, 3))
    ...     loss = trainkit.nn.functional.mse_loss(out, trainkit.zeros(4, 2))
    >>> out.dtype, loss.dtype
    (trainkit.bfloat16, trainkit.float32)
    >>> loss.backward(); layer.weight.grad.dtype
    trainkit.float32
    """

    def __init__(
        self,
        device_type: str,
        dtype: dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ):
        self.device = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else to_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if enabled:
            if self.device == "cuda":
                if not cuda_is_available():
                    warnings.warn(CUDA_UNAVAILABLE, UserWarning, stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in (bfloat16, float16):
                warnings.warn(
                    "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                    "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                    UserWarning,
                    stacklevel=2,
                )
                enabled = False
        self._enabled = bool(enabled)
        self._saved: list[tuple] = []  # what each (possibly nested) entry of this object replaced

    def __enter__(self) -> autocast:
        st = core.state
        self._saved.append((st.enabled[self.device], st.dtype[self.device], st.cache_enabled))
        st.dtype[self.device] = self.fast_dtype.np
        st.cache_enabled = self._cache_enabled
        set_autocast_enabled(self.device, self._enabled)
        st.nesting += 1
        return self

    def __exit__(self, *exc) -> None:
        st = core.state
        st.nesting -= 1
        if st.nesting == 0:  # the casts kept for this region must not outlive it
            core.clear_cache()
        enabled, fast, cache = self._saved.pop()
        st.dtype[self.device] = fast
        st.cache_enabled = cache
        set_autocast_enabled(self.device, enabled)

    def __call__(self, func: Callable) -> Callable:
        """``@autocast(...)``: the function runs inside the block at every call."""

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorated
