"""``GradScaler``: loss scaling for float16 training, as ``torch.amp.GradScaler``.

Each iteration: ``scaler.scale(loss).backward()`` (gradients come out multiplied by the scale, so small float16
gradients do not flush to zero), ``scaler.step(optimizer)`` (unscales the gradients, unless ``unscale_`` did already,
and skips the step when one of them is inf or NaN), ``scaler.update()`` (after a skipped step the scale is
multiplied by ``backoff_factor``; after ``growth_interval`` steps in a row without one, by ``growth_factor``).
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..autograd.backend import cuda_is_available, float32
from ..autograd.creation import full
from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor

__all__ = ["GradScaler", "OptState"]

NO_CUDA = "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."
_FIX = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."


class OptState(enum.Enum):
    """Where an optimizer is in the iteration: its gradients not yet unscaled, unscaled, or stepped."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _f32(value: float) -> float:
    """``value`` rounded to float32, the dtype PyTorch keeps the scale in."""
    return float(np.float32(value))


class GradScaler:
    """Scale the loss, unscale the gradients, skip steps with inf/NaN gradients and adapt the scale.

    ``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True)``. For ``device="cuda"`` without a GPU it warns and disables itself, as PyTorch does: then
    ``scale`` returns its argument, ``step`` just calls ``optimizer.step()`` and ``update`` does nothing.
    ``device="cpu"`` works everywhere.

    >>> import trainkit
    >>> w = trainkit.nn.Parameter(trainkit.ones(2))
    >>> opt = trainkit.optim.SGD([w], lr=0.1)
    >>> scaler = GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    >>> scaler.scale((w * 2).sum()).backward()
    >>> w.grad                                            # scaled by 1024
    tensor([2048., 2048.])
    >>> scaler.step(opt); scaler.update()
    >>> w.grad, scaler.get_scale()                        # unscaled before the step; the scale grew
    (tensor([2., 2.]), 2048.0)
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = device
        self._enabled = bool(enabled)
        if device == "cuda" and self._enabled and not cuda_is_available():
            warnings.warn(NO_CUDA, UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._scale: Tensor | None = None  # made at the first scale(), on the outputs' device
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker: int | None = None
        self._per_optimizer_states: dict[int, dict] = {}

    # ----------------------------------------------------------------------------------------------- the steps
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or a list/tuple/iterable of them) times the current scale; as is when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale_on(outputs)
        if isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes)):
            scaled = map(self.scale, outputs)
            return type(outputs)(scaled) if isinstance(outputs, (list, tuple)) else scaled
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _scale_on(self, t: Tensor) -> Tensor:
        if self._scale is None:
            self._scale = full((), self._init_scale, dtype=float32, device=t.device)
            self._growth_tracker = self._init_growth_tracker
        return self._scale if self._scale.device == t.device else self._scale.to(t.device)

    def _check_scale_growth_tracker(self, funcname: str) -> None:
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + _FIX)

    def _state(self, optimizer) -> dict:
        return self._per_optimizer_states.setdefault(id(optimizer), _fresh_state())

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (once per iteration; ``step`` does it when not
        called), noting whether any is inf or NaN. Call it before clipping gradients."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._state(optimizer)
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = _f32(1.0 / self._scale.item())  # the reciprocal in float64, then float32, as PyTorch
        found = 0.0
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype.name == "float16":
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g.mul_(inv_scale)
                    if not bool(g.isfinite().all()):
                        found = 1.0
        state["found_inf_per_device"] = {str(self._scale.device): found}
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs) -> Any:
        """``optimizer.step()`` after unscaling its gradients, skipped (returning None) when one is inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._state(optimizer)
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if not sum(state["found_inf_per_device"].values()):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale to the iteration's steps (or set it to ``new_scale``) and start the next iteration."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                value = new_scale
            else:
                reason = (
                    "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                    "torch.FloatTensor with requires_grad=False."
                )
                if not isinstance(new_scale, Tensor) or new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                if new_scale.device.type != self._scale.device.type:
                    raise AssertionError(reason)
                value = new_scale.item()
        else:
            found = [f for s in self._per_optimizer_states.values() for f in s["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            value = self._updated(self._scale.item(), sum(found))
        self._scale = full((), value, dtype=float32, device=self._scale.device)
        self._per_optimizer_states = {}

    def _updated(self, scale: float, found_inf: float) -> float:
        """PyTorch's ``_amp_update_scale_``: back off after an inf, grow after ``growth_interval`` clean steps."""
        if found_inf:
            self._growth_tracker = 0
            return _f32(scale * self._backoff_factor)
        tracker = self._growth_tracker + 1
        if tracker == self._growth_interval:
            self._growth_tracker = 0
            grown = _f32(scale * self._growth_factor)
            return grown if math.isfinite(grown) else scale
        self._growth_tracker = tracker
        return scale

    # --------------------------------------------------------------------------------------------- the state
    def get_scale(self) -> float:
        """The current scale (``init_scale`` before the first ``scale``); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return float(self._init_scale) if self._scale is None else self._scale.item()

    def get_growth_factor(self) -> float:
        """The factor the scale grows by after ``growth_interval`` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Change the growth factor."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a step with inf/NaN gradients."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Change the backoff factor."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """How many clean steps in a row make the scale grow."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Change the growth interval."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self) -> bool:
        """False when constructed disabled, or for CUDA on a machine without one."""
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``{'scale', 'growth_factor', 'backoff_factor', 'growth_interval', '_growth_tracker'}``; {} when
        disabled. Take it after ``update``.

        >>> GradScaler("cpu").state_dict()["scale"]
        65536.0
        """
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned (nothing happens when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = full((), self._init_scale, dtype=float32, device=self._scale.device)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker
