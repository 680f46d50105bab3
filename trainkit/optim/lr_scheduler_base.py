"""The scheduler base class: ``LRScheduler`` and the helpers its subclasses share.

A scheduler's ``step()`` advances ``last_epoch`` and writes each parameter group's new ``lr``; the subclasses in
``lr_scheduler`` and ``one_cycle`` say what that rate is.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user
from .optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available."
)


def lrs(optimizer: Optimizer, key: str = "lr") -> list[Any]:
    """``group[key]`` of every group, tensors copied so the list never aliases the optimizer."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def set_lr(group: dict[str, Any], value: Any) -> None:
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(float(value))
    else:
        group["lr"] = value


def patch_step(optimizer: Optimizer) -> None:
    """Make ``optimizer.step`` note that it ran, so that stepping the scheduler first can be warned about."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    ref = weakref.ref(optimizer)  # the wrapper lives on the optimizer: a strong reference would be a cycle
    func = optimizer.step.__func__

    def wrapper(*args, **kwargs):
        opt = ref()
        opt._opt_called = True
        return func(opt, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    wrapper.__doc__ = func.__doc__
    optimizer.step = wrapper


class LRScheduler:
    r"""Base class of the schedulers: ``step()`` advances ``last_epoch`` :math:`t` and sets each group's rate to
    :math:`\eta_t = \text{get\_lr}()`, which subclasses compute from :math:`\eta_{t-1}` (the group's ``lr``) or
    from the initial rate :math:`\eta_0` (``base_lrs``).

    Creating a scheduler with ``last_epoch=-1`` records each group's ``initial_lr`` (``base_lrs``) and takes the
    first step (epoch 0). ``state_dict()`` is every attribute but the optimizer, as in PyTorch.

    >>> import trainkit
    >>> from trainkit.optim import SGD
    >>> from trainkit.optim.lr_scheduler import ExponentialLR
    >>> opt = SGD([trainkit.zeros(1, requires_grad=True)], lr=1.0)
    >>> sched = ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.5]
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial_lr = group["lr"]
                group.setdefault("initial_lr", initial_lr.clone() if isinstance(initial_lr, Tensor) else initial_lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming scheduler with "
                        "last_epoch >= 0."
                    )
        self.base_lrs: list[Any] = lrs(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        patch_step(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute of the scheduler except the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The learning rates set by the last ``step()``, one per parameter group."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        """The rates for the current ``last_epoch`` (called by ``step``; use ``get_last_lr`` to read them)."""
        raise NotImplementedError

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warn_user(
                "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                UserWarning,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (call it after ``optimizer.step()``); ``epoch`` (deprecated) jumps to that epoch with
        the closed form where there is one."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warn_user(
                    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                    "initialization. Please, make sure to call `optimizer.step()` before `lr_scheduler.step()`.",
                    UserWarning,
                )
            elif not getattr(self.optimizer, "_opt_called", False):
                warn_user(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. You should call them in the "
                    "opposite order: `optimizer.step()` before `lr_scheduler.step()`. Failure to do this will "
                    "result in skipping the first value of the learning rate schedule.",
                    UserWarning,
                )
        self._step_count += 1
        if epoch is not None:
            warn_user(EPOCH_DEPRECATION_WARNING, UserWarning)
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            set_lr(group, lr)
        self._last_lr: list[Any] = lrs(self.optimizer)
