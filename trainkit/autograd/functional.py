"""Higher-order helpers as ``torch.autograd.functional``: jacobian, hessian, vjp and jvp, for small inputs."""

from __future__ import annotations

from .api import grad
from .creation import zeros, zeros_like
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


def hessian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """Second derivatives of a function with a single-element output, as ``torch.autograd.functional.hessian``.

    For one input tensor the result is a tensor of shape ``input.shape + input.shape``. For a tuple of inputs it
    is a tuple of tuples: ``result[i][j]`` holds d2 f / d inputs[i] d inputs[j], of shape
    ``inputs[i].shape + inputs[j].shape``. Inputs the output does not depend on get zeros.

    >>> import trainkit
    >>> hessian(lambda a: (a ** 3).sum(), trainkit.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    >>> h = hessian(lambda a, b: (a * b).sum(), (trainkit.tensor([1.0, 2.0]), trainkit.tensor([3.0, 4.0])))
    >>> h[0][1]
    tensor([[1., 0.],
            [0., 1.]])
    """
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    single = not isinstance(inputs, tuple)
    if single and not isinstance(inputs, Tensor):
        raise TypeError(
            "The inputs given to hessian must be either a Tensor or a tuple of Tensors but the given inputs has type "
            f"{type(inputs)}."
        )
    for i, x in enumerate(_as_tuple(inputs)):
        if not isinstance(x, Tensor):
            raise TypeError(
                "The inputs given to hessian must be either a Tensor or a tuple of Tensors but the value at index "
                f"{i} has type {type(x)}."
            )
    xs = _inputs(inputs)
    out = func(*xs)
    if isinstance(out, tuple) or not isinstance(out, Tensor):
        raise RuntimeError("The function given to hessian should return a single Tensor")
    if out.numel() != 1:
        raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
    if out.requires_grad:
        grads = grad(out.reshape(()), xs, create_graph=True, allow_unused=True)
    else:
        grads = (None,) * len(xs)
    rows = []
    for x, g in zip(xs, grads):
        # one backward per element of this input's gradient gives a row of every block H[i][j] at once
        per_element = []
        if g is not None and g.requires_grad:
            flat = g.reshape(-1)
            for k in range(flat.shape[0]):
                per_element.append(grad(flat[k], xs, retain_graph=True, create_graph=create_graph, allow_unused=True))
        row = []
        for j, y in enumerate(xs):
            shape = tuple(x.shape) + tuple(y.shape)
            if per_element and any(e[j] is not None for e in per_element):
                block = stack([zeros_like(y) if e[j] is None else e[j] for e in per_element]).reshape(shape)
            else:
                block = zeros(shape, dtype=y.dtype, device=y.device)
            row.append(block if create_graph else block.detach())
        rows.append(tuple(row))
    return rows[0][0] if single else tuple(rows)
