"""The Trainer's ``precision``, as Lightning names it: what a training step runs in.

- ``"32-true"`` (the default; ``"32"``, ``32``): everything in float32.
- ``"bf16-mixed"`` (``"bf16"``): forward and loss under ``autocast(dtype=bfloat16)`` (products and convolutions in
  bfloat16, losses in float32); parameters, gradients and the optimizer stay float32. No loss scaling: bfloat16
  has float32's range.
- ``"16-mixed"`` (``"16"``, ``16``): the same with float16 and a ``GradScaler``, which scales the loss, unscales
  the gradients before clipping and skips the steps whose gradients overflowed; GPUs only, as in Lightning.
- ``"bf16-true"``, ``"16-true"``, ``"64-true"`` (``"64"``, ``64``): the model and the floating inputs in that dtype.

>>> Precision("bf16", "cpu").name
'bf16-mixed'
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

from ..amp.autocast_mode import autocast
from ..amp.grad_scaler import GradScaler
from ..autograd.backend import bfloat16, device, float16, float64
from ..autograd.tensor import Tensor
from ..layers.module import Module

__all__ = ["PRECISIONS", "Precision", "canonical"]

# What a config may say; the short forms are Lightning's older names (Trainer(precision=) also takes "32", "16",
# "64", as Lightning does; YAML reads an unquoted 32 as the number).
PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "bf16", 32, 16, 64)
_ALIASES = {"32": "32-true", 32: "32-true", "64": "64-true", 64: "64-true", "16": "16-mixed", 16: "16-mixed"}
_ALIASES["bf16"] = "bf16-mixed"
_TRUE_DTYPES = {"bf16-true": bfloat16, "16-true": float16, "64-true": float64}


def canonical(precision: Any) -> str:
    """The full name of a precision setting, or a ValueError listing the accepted ones.

    >>> canonical(32), canonical("bf16"), canonical("16-mixed")
    ('32-true', 'bf16-mixed', '16-mixed')
    """
    if isinstance(precision, bool) or (precision not in PRECISIONS and precision not in _ALIASES):
        shown = ", ".join(repr(p) for p in PRECISIONS)
        raise ValueError(f"precision={precision!r} is not supported; choose one of {shown}")
    return _ALIASES.get(precision, precision)


def cpu_refusal(precision: Any, device_type: str) -> str | None:
    """Why ``precision`` cannot run on ``device_type`` (None when it can): float16 mixed precision needs a GPU,
    as in Lightning.

    >>> cpu_refusal("16-mixed", "cpu")
    "AMP with float16 is not supported on the CPU: use 'bf16-mixed' there, or a GPU (device: cuda)"
    """
    if canonical(precision) == "16-mixed" and device_type == "cpu":
        return "AMP with float16 is not supported on the CPU: use 'bf16-mixed' there, or a GPU (device: cuda)"
    return None


class Precision:
    """One Trainer's precision: the context its forward and loss run in, the backward, the optimizer step, and
    the dtype of the model and its inputs.

    >>> import trainkit
    >>> p = Precision("bf16-mixed", "cpu")
    >>> layer = trainkit.nn.Linear(2, 2)
    >>> with p.forward_context():
    ...     layer(trainkit.ones(1, 2)).dtype
    trainkit.bfloat16
    """

    def __init__(self, precision: Any, dev: Any = "cpu"):
        self.name = canonical(precision)
        self.device_type = device(dev).type if not isinstance(dev, device) else dev.type
        refusal = cpu_refusal(precision, self.device_type)
        if refusal is not None:
            raise ValueError(f"precision={precision!r}: {refusal}")
        if precision in ("16", 16, "bf16"):  # Lightning's warning for its older names
            warnings.warn(
                f"{precision!r} is supported for historical reasons but its usage is discouraged. Please set your "
                f"precision to {self.name} instead!",
                UserWarning,
                stacklevel=3,
            )
        mixed = {"bf16-mixed": bfloat16, "16-mixed": float16}.get(self.name)
        self.autocast_dtype = mixed
        self.dtype = _TRUE_DTYPES.get(self.name)  # the model's dtype for the "-true" settings
        self.scaler = GradScaler(self.device_type) if self.name == "16-mixed" else None

    def forward_context(self) -> contextlib.AbstractContextManager:
        """Where the forward pass and the loss run: autocast for the mixed settings, else nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return autocast(self.device_type, dtype=self.autocast_dtype)

    def convert_module(self, model: Module) -> Module:
        """The model in the "-true" dtype (its floating parameters and buffers); as it is otherwise."""
        if self.dtype is None:
            return model
        return model.to(self.dtype)

    def convert_input(self, value: Any) -> Any:
        """A floating input tensor in the "-true" dtype; anything else as it is."""
        if self.dtype is None or not isinstance(value, Tensor) or not value.is_floating_point():
            return value
        return value.to(self.dtype)

    def backward(self, loss: Tensor) -> None:
        """``loss.backward()``, through the GradScaler's scale with "16-mixed"."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def unscale(self, optimizer: Any) -> None:
        """Bring scaled gradients back to their true size before clipping and the step's callbacks."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """``optimizer.step()``; with "16-mixed" the scaler's step (skipped on inf/NaN gradients) and update."""
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()
