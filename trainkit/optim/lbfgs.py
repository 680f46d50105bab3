"""L-BFGS: a quasi-Newton method that builds its step from the last few gradient differences, optionally with a
strong-Wolfe line search (PyTorch's ``torch.optim.LBFGS``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..autograd.creation import zeros
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.ops.shape import cat
from ..autograd.tensor import Tensor
from .optimizer import Optimizer, check_tensor_hyper, hyper

__all__ = ["LBFGS"]


def cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    r"""The minimiser of the cubic through :math:`(x_1, f_1)` and :math:`(x_2, f_2)` with slopes :math:`g_1, g_2`,
    clamped to ``bounds`` (default: between the two points); their midpoint when the cubic has no minimum.

    With :math:`d_1 = g_1 + g_2 - 3 (f_1 - f_2) / (x_1 - x_2)` and :math:`d_2 = \sqrt{d_1^2 - g_1 g_2}`, the
    minimiser is :math:`x_2 - (x_2 - x_1) (g_2 + d_2 - d_1) / (g_2 - g_1 + 2 d_2)` (for :math:`x_1 \le x_2`).

    >>> cubic_interpolate(0.0, 1.0, -2.0, 2.0, 1.0, 2.0)  # (x - 1)^2: the minimum at 1
    1.0
    """
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (xmin_bound + xmax_bound) / 2.0
    d2 = d2_square**0.5
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, xmin_bound), xmax_bound)


class Bracket:
    """The interval a line search narrows: step sizes with their loss, gradient and directional derivative."""

    def __init__(self, points: list) -> None:
        self.t = [p[0] for p in points]
        self.f = [p[1] for p in points]
        self.g = [p[2] for p in points]
        self.gtd = [p[3] for p in points]

    def set(self, i: int, point: tuple) -> None:
        self.t[i], self.f[i], self.g[i], self.gtd[i] = point


def strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    r"""A step size along ``d`` meeting the strong Wolfe conditions
    :math:`f(x + t d) \le f(x) + c_1 t\, g^\top d` and :math:`|g(x + t d)^\top d| \le -c_2\, g^\top d`: first
    extrapolate (cubic interpolation, steps growing up to 10x) until an interval holds such a step, then zoom
    into it. ``obj_func(x, t, d)`` returns the loss and the flat gradient at ``x + t d``.

    Returns ``(loss, flat_grad, t, evaluations)``.
    """
    d_norm = d.abs().max()
    g = g.clone()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = None
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket = Bracket([(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new.clone(), gtd_new)])
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = Bracket([(t, f_new, g_new, gtd_new)])
            done = True
            break
        if gtd_new >= 0:
            bracket = Bracket([(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new.clone(), gtd_new)])
            break
        # extrapolate: the cubic's minimum, at least 1% past the last step and at most 10 times it
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        t, t_prev = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step)), t
        f_prev, g_prev, gtd_prev = f_new, g_new.clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = Bracket([(0, f, g, None), (t, f_new, g_new, None)])

    insuf_progress = False
    low, high = (0, 1) if bracket.f[0] <= bracket.f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket.t[0], bracket.f[0], bracket.gtd[0], bracket.t[1], bracket.f[1], bracket.gtd[1])
        # a step too close to an end of the interval makes little progress: move it 10% of the way in
        lo, hi = min(bracket.t), max(bracket.t)
        eps = 0.1 * (hi - lo)
        if min(hi - t, t - lo) < eps:
            if insuf_progress or t >= hi or t <= lo:
                t = hi - eps if abs(t - hi) < abs(t - lo) else lo + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket.f[low]:
            bracket.set(high, (t, f_new, g_new.clone(), gtd_new))
            low, high = (0, 1) if bracket.f[0] <= bracket.f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket.t[high] - bracket.t[low]) >= 0:
                bracket.set(high, (bracket.t[low], bracket.f[low], bracket.g[low], bracket.gtd[low]))
            bracket.set(low, (t, f_new, g_new.clone(), gtd_new))
    return bracket.f[low], bracket.g[low], bracket.t[low], ls_func_evals


class LBFGS(Optimizer):
    r"""L-BFGS (PyTorch's ``torch.optim.LBFGS``): ``step(closure)`` runs up to ``max_iter`` iterations, each
    re-evaluating the loss through ``closure`` (which zeroes the gradients, computes the loss, calls
    ``backward`` and returns the loss).

    The direction is :math:`d = -H g`, with :math:`H` the inverse-Hessian estimate of the two-loop recursion
    over the last ``history_size`` pairs :math:`s_k = t_k d_k`, :math:`y_k = g_{k+1} - g_k` (a pair is kept when
    :math:`y^\top s > 10^{-10}`; :math:`H_0 = (y^\top s / y^\top y) I`). The step is
    :math:`\theta \leftarrow \theta + t d` with :math:`t = \text{lr}` (the very first:
    :math:`\min(1, 1 / \lVert g \rVert_1)\,\text{lr}`), or the strong-Wolfe line search's
    (``line_search_fn="strong_wolfe"``). Iterations stop at ``max_eval`` evaluations, when
    :math:`\max |g| \le` ``tolerance_grad``, or when the step or the loss changes by less than ``tolerance_change``.
    One parameter group only; the state (history, direction, counters) lives in ``state[first parameter]``.

    >>> import trainkit
    >>> w = trainkit.tensor([3.0, -1.0], requires_grad=True)
    >>> opt = LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> w.detach()
    tensor([1., 1.])
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float | Tensor = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        check_tensor_hyper("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self.params = self.param_groups[0]["params"]

    def flat_grad(self) -> Tensor:
        """Every parameter's gradient in one vector (zeros where a parameter has none)."""
        views = [zeros(p.numel(), dtype=p.dtype) if p.grad is None else p.grad.reshape(-1) for p in self.params]
        return cat(views, 0)

    def add_grad(self, step_size, update: Tensor) -> None:
        """Each parameter += step_size * its slice of the flat ``update``."""
        offset = 0
        for p in self.params:
            numel = p.numel()
            p.add_(update[offset : offset + numel].view(p.shape), alpha=step_size)
            offset += numel

    def directional_evaluate(self, closure: Callable, x: list[Tensor], t, d: Tensor):
        """The loss and flat gradient at ``x + t d``; the parameters are put back to ``x`` after."""
        self.add_grad(t, d)
        loss = float(closure())
        flat_grad = self.flat_grad()
        for p, data in zip(self.params, x):
            p.copy_(data)
        return loss, flat_grad

    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Up to ``max_iter`` L-BFGS iterations; returns the loss of the first evaluation of ``closure``."""
        with no_grad():
            return self.iterate(enable_grad()(closure))

    def iterate(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr = hyper(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self.params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self.flat_grad()
        if flat_grad.abs().max() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro, h_diag = (
            state.get("old_dirs"),
            state.get("old_stps"),
            state.get("ro"),
            state.get("H_diag"),
        )
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:  # a pair that keeps the estimate positive definite
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # the two-loop recursion: d = -H g
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = [p.clone() for p in self.params]

                def obj_func(x, t, d):
                    return self.directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self.add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self.add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # the last iteration's loss is the next step's first evaluation
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self.flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag)
        state.update(prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
