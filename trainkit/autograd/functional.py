"""Higher-order helpers as ``torch.autograd.functional``: jacobian, hessian, vjp and jvp, for small inputs."""

from __future__ import annotations

from .api import grad
from .creation import zeros_like
from .ops.shape import stack
from .tensor import Tensor


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _inputs(inputs) -> tuple:
    return tuple(t.detach().requires_grad_(True) for t in _as_tuple(inputs))


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product.

    >>> import trainkit
    >>> vjp(lambda a: a ** 2, trainkit.tensor([1.0, 2.0]), trainkit.ones(2))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    single = not isinstance(inputs, tuple)
    xs = _inputs(inputs)
    out = func(*xs)
    grads = grad(out, xs, v, create_graph=create_graph, allow_unused=True)
    grads = tuple(zeros_like(x) if g is None else g for x, g in zip(xs, grads))
    result = out if create_graph else out.detach()
    return result, (grads[0] if single else grads)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)``: the Jacobian-vector product, by differentiating a vjp (the double-backward trick).

    >>> import trainkit
    >>> jvp(lambda a: a ** 2, trainkit.tensor([1.0, 2.0]), trainkit.ones(2))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    xs = _inputs(inputs)
    out = func(*xs)
    u = zeros_like(out).requires_grad_(True)  # J^T u is linear in u: differentiating <J^T u, v> by u gives J v
    grads = grad(out, xs, u, create_graph=True, allow_unused=True)
    total = sum((g * w).sum() for g, w in zip(grads, _as_tuple(v)) if g is not None)
    (jv,) = grad(total, u, create_graph=create_graph)
    return (out if create_graph else out.detach()), (jv if create_graph else jv.detach())


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False):
    """d func(inputs) / d inputs, shaped ``output.shape + input.shape`` (one backward per output element).

    >>> import trainkit
    >>> jacobian(lambda a: a ** 2, trainkit.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    single = not isinstance(inputs, tuple)
    xs = _inputs(inputs)
    out = func(*xs)
    flat = out.reshape(-1)
    rows = []
    for i in range(flat.shape[0]):
        gs = grad(flat[i], xs, retain_graph=True, create_graph=create_graph, allow_unused=True)
        rows.append(tuple(zeros_like(x) if g is None else g for x, g in zip(xs, gs)))
    result = tuple(
        stack([r[k] for r in rows]).reshape(tuple(out.shape) + tuple(x.shape)) if rows else zeros_like(x)
        for k, x in enumerate(xs)
    )
    return result[0] if single else result


def hessian(func, inputs, create_graph: bool = False, strict: bool = False):
    """Second derivatives of a scalar ``func``: the Jacobian of its gradient.

    >>> import trainkit
    >>> hessian(lambda a: (a ** 3).sum(), trainkit.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    if isinstance(inputs, tuple):
        raise NotImplementedError("hessian of several inputs: call it on one input tensor at a time")

    def gradient(x: Tensor) -> Tensor:
        (g,) = grad(func(x), x, create_graph=True)
        return g

    return jacobian(gradient, inputs, create_graph=create_graph)
