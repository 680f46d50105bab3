"""The built-in differentiable ops, one module per family; importing this package gives Tensor its methods."""

from . import (  # noqa: F401
    activation,
    copy,
    cumulative,
    dual,
    einsum,
    elementwise,
    gather_scatter,
    inplace,
    linalg,
    masking,
    math,
    methods,  # noqa: F401  (binds the methods and operators onto Tensor)
    more_math,
    norm,
    rearrange,
    reduction,
    shape,
    sorting,
    special,
    triangular,
    trigonometric,
    type_names,
)
