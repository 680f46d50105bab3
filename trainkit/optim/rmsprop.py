"""RMSprop: steps divided by a running root-mean-square of the gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd.backend import xp_of
from ..autograd.creation import tensor, zeros_like
from ..autograd.tensor import Tensor
from .optimizer import Optimizer, add_, addcdiv_, addcmul_, added, bump_version, check_tensor_hyper, hyper, lerp_


class RMSprop(Optimizer):
    r"""RMSprop (PyTorch's ``torch.optim.RMSprop``).

    For each parameter :math:`\theta` with gradient :math:`g_t` (negated when ``maximize``):

    .. math::
        g_t &\leftarrow g_t + \lambda\,\theta_{t-1} \quad \text{(weight decay)} \\
        v_t &= \alpha\,v_{t-1} + (1 - \alpha)\,g_t^2 \\
        \bar g_t &= \alpha\,\bar g_{t-1} + (1 - \alpha)\,g_t, \quad
            d_t = \sqrt{v_t - \bar g_t^2} + \epsilon \ \text{if centered, else}\ d_t = \sqrt{v_t} + \epsilon \\
        b_t &= \mu\,b_{t-1} + g_t / d_t, \quad \theta_t = \theta_{t-1} - \gamma\,b_t \ \text{if momentum}
            \ \mu > 0\text{, else}\ \theta_t = \theta_{t-1} - \gamma\,g_t / d_t

    State per parameter: ``step`` (a float32 0-d CPU tensor), ``square_avg`` (:math:`v`), and
    ``momentum_buffer`` (:math:`b`) and ``grad_avg`` (:math:`\bar g`) when momentum or centered ask for them.

    >>> import trainkit
    >>> from trainkit.optim import RMSprop
    >>> w = trainkit.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = RMSprop([w], lr=0.01, alpha=0.75)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9800, -1.9800], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        check_tensor_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, alpha, eps = hyper(group["lr"]), group["alpha"], group["eps"]
        weight_decay, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = tensor(0.0)
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
            param, grad = p._data, p._grad._data
            xp = xp_of(param)
            state["step"]._data += 1
            bump_version(state["step"])
            if group["maximize"]:
                grad = xp.negative(grad)
            if weight_decay != 0:
                grad = added(grad, param, weight_decay)

            square_avg = state["square_avg"]._data
            xp.multiply(square_avg, square_avg.dtype.type(alpha), out=square_avg)
            addcmul_(square_avg, grad, grad, 1 - alpha)
            bump_version(state["square_avg"])
            if centered:
                grad_avg = state["grad_avg"]._data
                lerp_(grad_avg, grad, 1 - alpha)
                bump_version(state["grad_avg"])
                avg = square_avg.copy()
                addcmul_(avg, grad_avg, grad_avg, -1)
                xp.sqrt(avg, out=avg)
            else:
                avg = xp.sqrt(square_avg)
            xp.add(avg, avg.dtype.type(eps), out=avg)

            if momentum > 0:
                buf = state["momentum_buffer"]._data
                xp.multiply(buf, buf.dtype.type(momentum), out=buf)
                addcdiv_(buf, grad, avg)
                bump_version(state["momentum_buffer"])
                add_(param, buf, -lr)
            else:
                addcdiv_(param, grad, avg, -lr)
            bump_version(p)
