"""Vectors scaled to unit norm and the cosine of the angle between them, with ``torch.nn.functional``'s signatures:
normalize and cosine_similarity.

Both are composed of the core's differentiable ops in the order PyTorch composes them, so that their graphs hold
the same nodes and their gradients agree at the edges too: a vector whose norm is below ``eps`` is divided by
``eps``. normalize clamps the norm in the graph (the clamped part gets no gradient); cosine_similarity clamps it
outside the graph, as PyTorch does, so the gradient flows through the unclamped norm (0 at a zero vector) and the
division by ``eps``.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.backend import kind_of, result_type
from ..autograd.function import shape_error
from ..autograd.ops import math
from ..autograd.ops.copy import clone
from ..autograd.ops.norm import norm
from ..autograd.ops.shape import expand, expand_as
from ..autograd.ops.table import cast
from ..autograd.ops.type_names import scalar_name
from ..autograd.out import with_out
from ..autograd.tensor import Tensor

__all__ = ["cosine_similarity", "normalize"]

_div_out = with_out(math.div, "div")


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """Each vector along ``dim`` divided by its ``p``-norm, or by ``eps`` where the norm is smaller.

    ``dim`` may be a tuple of dimensions; with ``out`` the result is written there (outside the graph).

    >>> import trainkit
    >>> normalize(trainkit.tensor([[3.0, 4.0], [0.0, 0.0]]))
    tensor([[0.6000, 0.8000],
            [0.0000, 0.0000]])
    """
    if out is None:
        return math.div(input, expand_as(math.clamp_min(norm(input, p, dim, keepdim=True), eps), input))
    with grad_mode.no_grad():
        denom = norm(input, p, dim, keepdim=True).clamp_min_(eps)
    return _div_out(input, expand_as(denom, input), out=out)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between the vectors of ``x1`` and ``x2`` along ``dim``: x1 . x2 / (|x1| |x2|),
    with each norm at least ``eps``. The two broadcast against each other; ``dim`` counts in the broadcast shape.

    >>> import trainkit
    >>> cosine_similarity(trainkit.tensor([[1.0, 0.0], [1.0, 1.0]]), trainkit.tensor([1.0, 0.0]), dim=-1)
    tensor([1.0000, 0.7071])
    """
    for position, (arg, v) in enumerate((("x1", x1), ("x2", x2)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(
                f"cosine_similarity(): argument '{arg}' (position {position}) must be Tensor, not {type(v).__name__}"
            )
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"cosine_similarity(): argument 'dim' must be int, not {type(dim).__name__}")
    common = result_type(x1._data, x2._data)
    if kind_of(common) != "f":
        raise RuntimeError(
            f"expected common dtype to be floating point, yet common dtype is {scalar_name(common)}: "
            "cosine_similarity needs a floating-point x1 or x2"
        )
    # integers and bools join the other operand's float dtype; two floats of different widths stay as they are
    x1 = x1 if kind_of(x1._data.dtype) == "f" else cast(x1, common)
    x2 = x2 if kind_of(x2._data.dtype) == "f" else cast(x2, common)
    if x1._data.shape != x2._data.shape:
        try:
            shape = np.broadcast_shapes(x1._data.shape, x2._data.shape)
        except ValueError as err:
            raise shape_error("cosine_similarity", (x1._data, x2._data), err) from None
        x1, x2 = expand(x1, *shape), expand(x2, *shape)
    n1 = clone(norm(x1, 2, dim, keepdim=True))
    n2 = clone(norm(x2, 2, dim, keepdim=True))
    with grad_mode.no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return (math.div(x1, n1) * math.div(x2, n2)).sum(dim)
