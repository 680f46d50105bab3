"""Stochastic gradient descent, with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd.backend import xp_of
from ..autograd.tensor import Tensor
from .optimizer import Optimizer, add_, added, bump_version, check_tensor_hyper, hyper


class SGD(Optimizer):
    r"""Stochastic gradient descent (PyTorch's ``torch.optim.SGD``).

    For each parameter :math:`\theta` with gradient :math:`g_t` (negated when ``maximize``):

    .. math::
        g_t &\leftarrow g_t + \lambda\,\theta_{t-1} \quad \text{(weight decay } \lambda\text{)} \\
        b_t &= \begin{cases} g_t & t = 1 \\ \mu\,b_{t-1} + (1 - \tau)\,g_t & t > 1 \end{cases}
            \quad \text{(momentum } \mu \text{, dampening } \tau\text{)} \\
        g_t &\leftarrow g_t + \mu\,b_t \ \text{if nesterov, else}\ b_t \\
        \theta_t &= \theta_{t-1} - \gamma\,g_t

    The momentum buffer :math:`b` is kept in ``state[p]['momentum_buffer']`` (only when momentum is not 0).

    >>> import trainkit
    >>> from trainkit.optim import SGD
    >>> w = trainkit.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        check_tensor_hyper("lr", lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, momentum, dampening = hyper(group["lr"]), group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in params:
            param = p._data
            grad = p._grad._data
            if maximize:
                grad = xp_of(grad).negative(grad)
            if weight_decay != 0:
                grad = added(grad, param, weight_decay)
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = Tensor._make(grad.copy())
                else:
                    xp_of(buf._data).multiply(buf._data, buf._data.dtype.type(momentum), out=buf._data)
                    add_(buf._data, grad, 1 - dampening)
                    bump_version(buf)
                grad = added(grad, buf._data, momentum) if nesterov else buf._data
            add_(param, grad, -lr)
            bump_version(p)
