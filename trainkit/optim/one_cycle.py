"""OneCycleLR: the 1cycle policy, a warm-up to a peak rate and an annealing far below the start, stepped per batch."""

from __future__ import annotations

import math
from typing import Any

from ..autograd.tensor import Tensor
from .lr_scheduler_base import LRScheduler
from .optimizer import Optimizer


def format_param(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """One value per parameter group: ``value`` repeated, or a list with one per group (tensors copied)."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(value)} values, param_groups has {len(optimizer.param_groups)}."
            )
    else:
        value = [value] * len(optimizer.param_groups)
    return [v.clone() if isinstance(v, Tensor) else v for v in value]


class OneCycleLR(LRScheduler):
    r"""The 1cycle policy (PyTorch's ``torch.optim.lr_scheduler.OneCycleLR``): the rate climbs from
    :math:`\eta_0 = \eta_{\max} / \text{div\_factor}` to ``max_lr`` over the first ``pct_start`` of the
    ``total_steps``, then falls to :math:`\eta_{\min} = \eta_0 / \text{final\_div\_factor}`; with
    ``three_phase=True`` it first comes back down to :math:`\eta_0` (symmetrically) and only then falls to
    :math:`\eta_{\min}`. Call ``step()`` after every batch, not every epoch.

    Within a phase running from step :math:`s_0` to :math:`s_1` between rates :math:`a` and :math:`b`, step
    :math:`t` has :math:`p = (t - s_0) / (s_1 - s_0)` and

    .. math::
        \eta_t = b + \frac{a - b}{2}\,(1 + \cos \pi p) \quad \text{(``'cos'``)}, \qquad
        \eta_t = a + (b - a)\,p \quad \text{(``'linear'``)}

    where the warm-up ends at step :math:`\text{pct\_start}\cdot T - 1`, the three-phase form's way back down at
    :math:`2\,\text{pct\_start}\cdot T - 2`, and the last phase at :math:`T - 1`, as PyTorch counts them. With
    ``cycle_momentum`` the momentum (SGD's and RMSprop's ``momentum``, Adam's ``betas[0]``) moves the opposite way,
    between ``max_momentum`` and ``base_momentum``. Stepping more than ``total_steps`` times raises a ValueError.
    ``total_steps`` may instead be given as ``epochs * steps_per_epoch``.

    Not chainable: each rate is computed from the schedule, not from the current one.

    >>> import trainkit
    >>> from trainkit.optim import SGD
    >>> opt = SGD([trainkit.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    >>> sched = OneCycleLR(opt, max_lr=1.0, total_steps=4, pct_start=0.5, anneal_strategy="linear")
    >>> lrs = sched.get_last_lr()
    >>> for _ in range(3):
    ...     opt.step(); sched.step(); lrs += sched.get_last_lr()
    >>> [round(lr, 4) for lr in lrs], round(opt.param_groups[0]["momentum"], 2)
    ([0.04, 1.0, 0.5, 0.0], 0.95)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer

        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        # each phase names the group keys it goes between; the last one ends at the last step
        warm_up = {
            "end_step": float(pct_start * self.total_steps) - 1,
            "start_lr": "initial_lr",
            "end_lr": "max_lr",
            "start_momentum": "max_momentum",
            "end_momentum": "base_momentum",
        }
        if three_phase:
            self._schedule_phases = [
                warm_up,
                {
                    "end_step": float(2 * pct_start * self.total_steps) - 2,
                    "start_lr": "max_lr",
                    "end_lr": "initial_lr",
                    "start_momentum": "base_momentum",
                    "end_momentum": "max_momentum",
                },
                {
                    "end_step": self.total_steps - 1,
                    "start_lr": "initial_lr",
                    "end_lr": "min_lr",
                    "start_momentum": "max_momentum",
                    "end_momentum": "max_momentum",
                },
            ]
        else:
            self._schedule_phases = [
                warm_up,
                {
                    "end_step": self.total_steps - 1,
                    "start_lr": "max_lr",
                    "end_lr": "min_lr",
                    "start_momentum": "base_momentum",
                    "end_momentum": "max_momentum",
                },
            ]

        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy

        max_lrs = format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for max_lr_of_group, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = max_lr_of_group / div_factor
                group["max_lr"] = max_lr_of_group
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = format_param("max_momentum", optimizer, max_momentum)
            base_momentums = format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(
                    max_momentums, base_momentums, optimizer.param_groups, strict=True
                ):
                    self._set_momentum(group, m_momentum)
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[Any]:
        """The rate of each group at step ``last_epoch``; moves each group's momentum too when it cycles."""
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is {self.total_steps}"
            )
        rates = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    rates.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                        self._set_momentum(group, momentum)
                    break
                start_step = phase["end_step"]
        return rates


__all__ = ["OneCycleLR"]
