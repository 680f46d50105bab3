"""Adagrad: steps divided by the root of each coordinate's running sum of squared gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd.backend import xp_of
from ..autograd.creation import full_like, tensor
from ..autograd.tensor import Tensor
from .optimizer import Optimizer, addcdiv_, addcmul_, added, bump_version, check_tensor_hyper, hyper


class Adagrad(Optimizer):
    r"""Adagrad (PyTorch's ``torch.optim.Adagrad``).

    For each parameter :math:`\theta` with gradient :math:`g_t` (negated when ``maximize``), at step :math:`t`:

    .. math::
        g_t &\leftarrow g_t + \lambda\,\theta_{t-1} \quad \text{(weight decay)} \\
        \tilde\gamma_t &= \gamma / (1 + (t - 1)\,\eta) \quad \text{(lr decay } \eta\text{)} \\
        s_t &= s_{t-1} + g_t^2, \qquad s_0 = \text{initial\_accumulator\_value} \\
        \theta_t &= \theta_{t-1} - \tilde\gamma_t\,\frac{g_t}{\sqrt{s_t} + \epsilon}

    State per parameter: ``step`` (a float32 0-d CPU tensor) and ``sum`` (:math:`s`). As in PyTorch, the state of
    the parameters given to the constructor exists from the start (``sum`` filled with
    ``initial_accumulator_value``); parameters of a group added later get theirs at their first step.

    >>> import trainkit
    >>> from trainkit.optim import Adagrad
    >>> w = trainkit.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adagrad([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.5000, -1.5000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
    ) -> None:
        check_tensor_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            maximize=maximize,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value)

    def _init_state(self, p: Tensor, initial_accumulator_value: float) -> dict[str, Any]:
        state = self.state[p]
        state["step"] = tensor(0.0)
        state["sum"] = full_like(p, initial_accumulator_value)
        return state

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, lr_decay, eps = hyper(group["lr"]), group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in params:
            state = self.state[p]
            if len(state) == 0:  # a group added after construction: PyTorch reads the constructor's default
                state = self._init_state(p, self.defaults["initial_accumulator_value"])
            param, grad = p._data, p._grad._data
            xp = xp_of(param)
            step_t = state["step"]
            step_t._data += 1
            bump_version(step_t)
            step = step_t.item()
            if maximize:
                grad = xp.negative(grad)
            if weight_decay != 0:
                grad = added(grad, param, weight_decay)
            clr = lr / (1 + (step - 1) * lr_decay)

            state_sum = state["sum"]._data
            addcmul_(state_sum, grad, grad, 1)
            bump_version(state["sum"])
            std = xp.sqrt(state_sum)
            xp.add(std, std.dtype.type(eps), out=std)
            addcdiv_(param, grad, std, -clr)
            bump_version(p)
