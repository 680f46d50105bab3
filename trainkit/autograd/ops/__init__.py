"""The built-in differentiable ops, one module per family; importing this package gives Tensor its methods."""

from . import (  # noqa: F401
    activation,
    copy,
    dual,
    linalg,
    math,
    methods,  # noqa: F401  (binds the methods and operators onto Tensor)
    reduction,
    shape,
)
