"""Adam, and the shared update that AdamW reuses with decoupled weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd.backend import xp_of
from ..autograd.creation import tensor, zeros_like
from ..autograd.tensor import Tensor
from .optimizer import (
    Optimizer,
    addcdiv_,
    addcmul_,
    added,
    blocks,
    bump_version,
    check_tensor_hyper,
    hyper,
    lerp_,
)


class Adam(Optimizer):
    r"""Adam (PyTorch's ``torch.optim.Adam``): steps scaled by running estimates of the gradient's first and second
    moments.

    For each parameter :math:`\theta` with gradient :math:`g_t` (negated when ``maximize``), at step :math:`t`:

    .. math::
        g_t &\leftarrow g_t + \lambda\,\theta_{t-1} \quad \text{(weight decay; AdamW instead sets }
            \theta_{t-1} \leftarrow \theta_{t-1}(1 - \gamma\lambda)\text{)} \\
        m_t &= \beta_1 m_{t-1} + (1 - \beta_1)\,g_t, \qquad v_t = \beta_2 v_{t-1} + (1 - \beta_2)\,g_t^2 \\
        \hat v_t &= \max(\hat v_{t-1}, v_t) \ \text{if amsgrad, else}\ v_t \\
        \theta_t &= \theta_{t-1} - \frac{\gamma}{1 - \beta_1^t}\,
            \frac{m_t}{\sqrt{\hat v_t} / \sqrt{1 - \beta_2^t} + \epsilon}

    State per parameter: ``step`` (a float32 0-d CPU tensor, as in PyTorch), ``exp_avg`` (:math:`m`),
    ``exp_avg_sq`` (:math:`v`) and, with amsgrad, ``max_exp_avg_sq``.

    >>> import trainkit
    >>> from trainkit.optim import Adam
    >>> w = trainkit.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ) -> None:
        check_tensor_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
            raise ValueError("betas must be either both floats or both Tensors")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, (beta1, beta2), eps = hyper(group["lr"]), group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = tensor(0.0)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            param, grad = p._data, p._grad._data
            step_t = state["step"]
            step_t._data += 1
            bump_version(step_t)
            # the bias corrections are Python floats, as in PyTorch's default (non-capturable) path
            step = step_t.item()
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            keys = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
            for part in blocks(param, grad, *(state[key]._data for key in keys)):
                self._update_arrays(
                    *part,
                    lr=lr,
                    beta1=beta1,
                    beta2=beta2,
                    eps=eps,
                    weight_decay=weight_decay,
                    decoupled=decoupled,
                    maximize=maximize,
                    step_size=step_size,
                    bias_correction2_sqrt=bias_correction2_sqrt,
                )
            for key in keys:
                bump_version(state[key])
            if weight_decay != 0 and decoupled:  # PyTorch changes the parameter twice: a mul_, then the step
                bump_version(p)
            bump_version(p)

    @staticmethod
    def _update_arrays(
        param,
        grad,
        exp_avg,
        exp_avg_sq,
        max_exp_avg_sq=None,
        *,
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        decoupled,
        maximize,
        step_size,
        bias_correction2_sqrt,
    ) -> None:
        """One Adam step on arrays: whole ones, or matching slices of them."""
        xp = xp_of(param)
        if maximize:
            grad = xp.negative(grad)
        if weight_decay != 0:
            if decoupled:
                xp.multiply(param, param.dtype.type(1 - lr * weight_decay), out=param)
            else:
                grad = added(grad, param, weight_decay)
        lerp_(exp_avg, grad, 1 - beta1)
        xp.multiply(exp_avg_sq, exp_avg_sq.dtype.type(beta2), out=exp_avg_sq)
        addcmul_(exp_avg_sq, grad, grad, 1 - beta2)
        if max_exp_avg_sq is not None:
            xp.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
            denom = xp.sqrt(max_exp_avg_sq)
        else:
            denom = xp.sqrt(exp_avg_sq)
        xp.divide(denom, denom.dtype.type(bias_correction2_sqrt), out=denom)
        xp.add(denom, denom.dtype.type(eps), out=denom)
        addcdiv_(param, exp_avg, denom, -step_size)
