"""trainkit.autograd: tensors that record operations, and the engine that runs them backward.

The public names follow ``torch.autograd``: ``grad``, ``backward``, ``Function``, ``gradcheck``, and the grad-mode
guards.
"""

from . import functional, ops  # noqa: F401  (ops gives Tensor its op methods)
from .anomaly import detect_anomaly
from .api import backward, grad
from .engine import AccumulateGrad, Node
from .explore import explore
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import Graph, graph
from .hooks import RemovableHandle
from .tensor import Tensor
from .variable import Variable

__all__ = [
    "AccumulateGrad",
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Graph",
    "Node",
    "RemovableHandle",
    "Tensor",
    "Variable",
    "backward",
    "detect_anomaly",
    "functional",
    "once_differentiable",
    "enable_grad",
    "explore",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
