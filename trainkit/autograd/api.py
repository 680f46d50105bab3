"""``backward`` and ``grad``: the two ways to start the engine, with PyTorch's checks and messages."""

from __future__ import annotations

import warnings

from .backend import as_array, kind_of, xp_of
from .engine import accumulate, accumulator, run_backward
from .tensor import Tensor, refresh_view


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    return (x,) if isinstance(x, Tensor) else tuple(x)


def _roots(tensors: tuple) -> list:
    roots = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"element {i} of tensors is a {type(t).__name__}, not a Tensor")
        refresh_view(t)
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append((t._grad_fn if t._grad_fn is not None else accumulator(t), t._output_nr))
    return roots


def _seed_grads(outputs: tuple, grads, create_graph: bool) -> list:
    """The gradients that start the pass: given ones checked against their outputs, or 1 for scalars."""
    grads = _as_tuple(grads) if grads is not None else (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(
            f"grad can be implicitly created only for scalar outputs; got {len(grads)} "
            f"gradients for {len(outputs)} outputs"
        )
    seeds = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if out._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if kind_of(out._data.dtype) != "f":
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {out.dtype}")
            array = xp_of(out._data).empty(out._data.shape, dtype=out._data.dtype)
            array.fill(1)  # ones() is a Python function that costs several times this on a scalar
            seeds.append(Tensor._make(array) if create_graph else array)
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"gradient for output {i} must be a Tensor, got {type(g).__name__}")
        if g._data.shape != out._data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a shape of "
                f"{out.shape}."
            )
        if type(g._data) is not type(out._data):
            raise RuntimeError(f"gradient for output {i} is on {g.device} but the output is on {out.device}")
        if create_graph:
            seeds.append(g if g.dtype == out.dtype else g.to(out.dtype))
        else:
            seeds.append(g._data if g._data.dtype == out._data.dtype else g._data.astype(out._data.dtype))
    return seeds


def backward(
    tensors, grad_tensors=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (or of ``inputs`` only).

    >>> import trainkit
    >>> x = trainkit.tensor([3.0], requires_grad=True)
    >>> backward((x * x).sum()); x.grad
    tensor([6.])
    """
    tensors = _as_tuple(tensors)
    roots = _roots(tensors)
    seeds = _seed_grads(tensors, grad_tensors, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph and inputs is None:
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the parameter and its "
            "gradient which can cause a memory leak. We recommend using autograd.grad when creating the graph to "
            "avoid this. If you have to use this function, make sure to reset the .grad fields of your parameters "
            "to None after use to break the cycle and avoid the leak.",
            UserWarning,
            stacklevel=3,
        )
    if inputs is None:
        run_backward(roots, seeds, retain_graph, create_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    places = _places(inputs)
    captured = run_backward(roots, seeds, retain_graph, create_graph, capture=places)
    for t, place in zip(inputs, places):
        g = captured.get(place)
        if g is not None:
            accumulate(t, g if create_graph else as_array(g).copy(), create_graph)


def tensor_backward(
    self: Tensor, gradient=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None
) -> None:
    """``tensor.backward()``: compute the gradient of this tensor with respect to the graph leaves, into their
    ``.grad``.

    >>> import trainkit
    >>> x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    >>> (x ** 2).sum().backward(); x.grad
    tensor([2., 4.])
    """
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _places(inputs: tuple) -> list:
    places = []
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
        refresh_view(t)
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        places.append((t._grad_fn if t._grad_fn is not None else accumulator(t), t._output_nr))
    return places


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple:
    """The gradients of ``outputs`` with respect to ``inputs``, returned instead of accumulated into ``.grad``.

    With ``create_graph=True`` the results are part of a graph themselves (for second derivatives).

    >>> import trainkit
    >>> x = trainkit.tensor(2.0, requires_grad=True)
    >>> (g,) = grad(x ** 3, x, create_graph=True)
    >>> g, grad(g, x)[0]
    (tensor(12., grad_fn=<MulBackward0>), tensor(12.))
    """
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("grad requires non-empty inputs.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True")
    roots = _roots(outputs)
    seeds = _seed_grads(outputs, grad_outputs, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    places = _places(inputs)
    captured = run_backward(roots, seeds, retain_graph, create_graph, capture=places)
    results = []
    for i, (t, place) in enumerate(zip(inputs, places)):
        g = captured.get(place)
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior."
                )
            results.append(Tensor._make(xp_of(t._data).zeros_like(t._data)) if materialize_grads else None)
        elif create_graph:
            results.append(g)
        else:
            g = as_array(g)
            results.append(Tensor._make(g.copy() if g.base is not None else g))
    return tuple(results)
