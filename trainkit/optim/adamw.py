"""AdamW: Adam with weight decay applied to the parameters directly rather than through the gradient."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..autograd.tensor import Tensor
from .adam import Adam


class AdamW(Adam):
    r"""AdamW (PyTorch's ``torch.optim.AdamW``): Adam with decoupled weight decay.

    Before the Adam update of step :math:`t`, each parameter shrinks by the learning rate times the weight decay,
    and the gradient itself is left alone:

    .. math::
        \theta_{t-1} &\leftarrow \theta_{t-1}\,(1 - \gamma\lambda) \\
        m_t &= \beta_1 m_{t-1} + (1 - \beta_1)\,g_t, \qquad v_t = \beta_2 v_{t-1} + (1 - \beta_2)\,g_t^2 \\
        \theta_t &= \theta_{t-1} - \frac{\gamma}{1 - \beta_1^t}\,
            \frac{m_t}{\sqrt{\hat v_t} / \sqrt{1 - \beta_2^t} + \epsilon}

    with :math:`\hat v_t = \max(\hat v_{t-1}, v_t)` under amsgrad, else :math:`v_t`. The state is Adam's.

    >>> import trainkit
    >>> from trainkit.optim import AdamW
    >>> w = trainkit.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8500, -1.8000], requires_grad=True)
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # a state dict saved by Adam must not turn the decay back into L2
            group["decoupled_weight_decay"] = True
