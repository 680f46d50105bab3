"""Check analytical gradients against finite differences, for built-in ops and users' own Functions alike."""

from __future__ import annotations

import warnings

import numpy as np

from .api import grad
from .backend import CPU, to_device, xp_of
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` when analytical and numerical gradients disagree."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _host(t: Tensor) -> np.ndarray:
    return np.asarray(to_device(t._data, CPU))


def _differentiable_outputs(func, inputs) -> list:
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.is_floating_point()]


def _numerical_jacobians(func, inputs, wrt: list, eps: float) -> list:
    """J[o][i] of shape (numel(output o), numel(input i)) by central differences, perturbing storage in place."""
    # grad mode stays on: the function may itself take gradients (gradgradcheck)
    sizes = [o._data.size for o in _differentiable_outputs(func, inputs)]
    jac = [[np.zeros((n, inputs[i]._data.size)) for i in wrt] for n in sizes]
    for k, i in enumerate(wrt):
        flat = inputs[i]._data.reshape(-1)  # a view: writes reach the tensor
        for j in range(flat.size):
            orig = flat[j].item()
            flat[j] = orig + eps
            plus = [_host(o).reshape(-1).astype(np.float64) for o in _differentiable_outputs(func, inputs)]
            flat[j] = orig - eps
            minus = [_host(o).reshape(-1).astype(np.float64) for o in _differentiable_outputs(func, inputs)]
            flat[j] = orig
            for o, (p, m) in enumerate(zip(plus, minus)):
                jac[o][k][:, j] = (p - m) / (2 * eps)
    return jac


def _analytical_jacobians(func, inputs, wrt: list) -> list:
    outputs = _differentiable_outputs(func, inputs)
    targets = [inputs[i] for i in wrt]
    jac = [[np.zeros((o._data.size, t._data.size)) for t in targets] for o in outputs]
    for o, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for r in range(out._data.size):
            grads = grad(out, targets, _one_hot(out, r), retain_graph=True, allow_unused=True)
            for k, g in enumerate(grads):
                if g is not None:
                    jac[o][k][r, :] = _host(g).reshape(-1)
    return jac


def _one_hot(out: Tensor, r: int) -> Tensor:
    seed = xp_of(out._data).zeros(out._data.shape, dtype=out._data.dtype)
    seed.reshape(-1)[r] = 1
    return Tensor._make(seed)


def gradcheck(
    func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True
) -> bool:
    """Compare the gradients autograd computes for ``func`` with central finite differences.

    Inputs that require grad should be float64: finite differences in float32 are too coarse to tell a wrong
    gradient from rounding.

    >>> import trainkit
    >>> x = trainkit.randn(3, dtype=trainkit.float64, requires_grad=True)
    >>> gradcheck(lambda t: (t * t.exp()).sum(), (x,))
    True
    """
    inputs = _as_tuple(inputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for i in wrt:
        if inputs[i]._data.dtype != np.float64:
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. gradcheck works "
                "best with float64 inputs.",
                UserWarning,
                stacklevel=2,
            )
    numerical = _numerical_jacobians(func, inputs, wrt, eps)
    analytical = _analytical_jacobians(func, inputs, wrt)
    for o, (num_row, ana_row) in enumerate(zip(numerical, analytical)):
        for k, (num, ana) in enumerate(zip(num_row, ana_row)):
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                message = (
                    f"Jacobian mismatch for output {o} with respect to input {wrt[k]},\n"
                    f"numerical:{num}\nanalytical:{ana}\n"
                )
                if raise_exception:
                    raise GradcheckError(message)
                return False
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
    """``gradcheck`` of the gradient itself: checks second derivatives built with ``create_graph=True``.

    >>> import trainkit
    >>> x = trainkit.randn(3, dtype=trainkit.float64, requires_grad=True)
    >>> gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    True
    """
    inputs = _as_tuple(inputs)
    n = len(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        outs = _differentiable_outputs(func, inputs)
        grad_outputs = tuple(
            Tensor._make(to_device(rng.standard_normal(o._data.shape), o.device)).requires_grad_()
            for o in outs
            if o.requires_grad
        )
    grad_outputs = _as_tuple(grad_outputs)

    def first_derivatives(*args):
        inps, gos = args[:n], args[n:]
        outs = [o for o in _differentiable_outputs(func, inps) if o.requires_grad]
        wrt = [t for t in inps if isinstance(t, Tensor) and t.requires_grad]
        grads = grad(outs, wrt, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception
    )
