"""Autocast's state and its cast policy: inside ``trainkit.autocast`` the ops of PyTorch's ``lower_precision_fp``
list run in the autocast dtype (bfloat16 on the CPU, float16 on a GPU, unless chosen otherwise) and those of its
``fp32`` list in float32, as ``aten/src/ATen/autocast_mode.cpp`` lists them per device.

``POLICY`` is the one table, a row per op name; an op asks for its inputs through ``autocast_inputs(name, ...)``
before it computes, and outside autocast gets them back untouched at the cost of one test. The casts are ordinary
``Tensor.to`` calls, so they are recorded as ``ToCopyBackward0`` nodes and gradients reach float32 parameters as
float32, as in PyTorch. Eligible inputs are floating tensors other than float64 on the autocast device; integer,
bool and float64 tensors pass as they are.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .backend import BFLOAT16_NP, bfloat16, float16, float32, is_floating
from .tensor import Tensor

__all__ = [
    "FP32",
    "LOWER",
    "POLICY",
    "autocast_inputs",
    "clear_cache",
    "enabled_threads",
    "state",
]

LOWER = "lower_precision_fp"  # cast to the autocast dtype
FP32 = "fp32"  # cast to float32

# One row per op: (the CPU policy, the CUDA policy); None leaves the inputs as they are on that device. Names are
# PyTorch's op names; trainkit's layers call their functionals, which ask under these names.
POLICY: dict[str, tuple[str | None, str | None]] = {
    # the products and convolutions: the work autocast exists for
    "linear": (LOWER, LOWER),
    "matmul": (LOWER, LOWER),
    "mm": (LOWER, LOWER),
    "bmm": (LOWER, LOWER),
    "mv": (None, LOWER),
    "addmm": (LOWER, LOWER),
    "addbmm": (LOWER, LOWER),
    "baddbmm": (LOWER, LOWER),
    "einsum": (None, LOWER),
    "conv1d": (LOWER, LOWER),
    "conv2d": (LOWER, LOWER),
    "conv3d": (LOWER, LOWER),
    "conv_transpose1d": (LOWER, LOWER),
    "conv_transpose2d": (LOWER, LOWER),
    "conv_transpose3d": (LOWER, LOWER),
    "prelu": (LOWER, LOWER),
    "scaled_dot_product_attention": (LOWER, LOWER),
    "multi_head_attention": (LOWER, LOWER),
    # recurrent layers: on the CPU PyTorch's oneDNN layer (LSTM, and RNN with tanh or relu) takes the lower
    # precision, its GRU and the cells stay in the input's dtype; on a GPU every recurrent kernel is listed
    "lstm": (LOWER, LOWER),
    "rnn_tanh": (LOWER, LOWER),
    "rnn_relu": (LOWER, LOWER),
    "gru": (None, LOWER),
    "lstm_cell": (None, LOWER),
    "gru_cell": (None, LOWER),
    "rnn_tanh_cell": (None, LOWER),
    "rnn_relu_cell": (None, LOWER),
    # losses and the ops whose range or sums the lower precision would spoil
    "mse_loss": (FP32, FP32),
    "l1_loss": (FP32, FP32),
    "smooth_l1_loss": (FP32, FP32),
    "huber_loss": (FP32, FP32),
    "cross_entropy": (FP32, None),  # on a GPU its log_softmax is the one listed
    "nll_loss": (FP32, FP32),
    "binary_cross_entropy": (FP32, None),  # a GPU refuses it under autocast
    "binary_cross_entropy_with_logits": (FP32, FP32),
    "kl_div": (FP32, FP32),
    "poisson_nll_loss": (FP32, FP32),
    "hinge_embedding_loss": (FP32, FP32),
    "cosine_embedding_loss": (FP32, FP32),
    "margin_ranking_loss": (FP32, FP32),
    "soft_margin_loss": (FP32, FP32),
    "multi_margin_loss": (FP32, FP32),
    "multilabel_margin_loss": (FP32, FP32),
    "triplet_margin_loss": (FP32, FP32),
    "prod": (FP32, FP32),
    "cdist": (FP32, FP32),
    "trace": (FP32, None),
    "softmax": (None, FP32),
    "log_softmax": (None, FP32),
    "layer_norm": (None, FP32),
    "group_norm": (None, FP32),
    "cosine_similarity": (None, FP32),
    "softplus": (None, FP32),
    "logsumexp": (None, FP32),
    "cumsum": (None, FP32),
    "cumprod": (None, FP32),
    "sum": (None, FP32),
    "exp": (None, FP32),
    "log": (None, FP32),
    "pow": (None, FP32),
}
_COLUMN = {"cpu": 0, "cuda": 1}
_DTYPES = {d.np: d for d in (bfloat16, float16, float32)}


class _State(threading.local):
    """This thread's autocast settings, per device type (thread-local, as PyTorch's)."""

    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": BFLOAT16_NP, "cuda": np.dtype(np.float16)}
        self.cache_enabled = True
        self.nesting = 0  # open autocast blocks: leaving the outermost one empties the cache
        self.cache: dict[int, tuple] = {}  # id(float32 leaf) -> (weakref to it, its cast)


state = _State()
# The idents of threads with autocast enabled on some device: while it is empty, an op tells that autocast is off
# without reading the thread-local state.
enabled_threads: set = set()


def autocast_inputs(op: str, *args) -> tuple:
    """``args`` with their eligible tensors cast as autocast's ``POLICY`` says for ``op`` on their device; as
    they are outside autocast, or when the policy has nothing for ``op`` there.

    >>> import trainkit
    >>> x = trainkit.ones(2, 2)
    >>> autocast_inputs("linear", x, None)[0].dtype
    trainkit.float32
    >>> with trainkit.autocast("cpu"):
    ...     autocast_inputs("linear", x, None)[0].dtype, autocast_inputs("mse_loss", x)[0].dtype
    (trainkit.bfloat16, trainkit.float32)
    """
    if not enabled_threads or threading.get_ident() not in enabled_threads:
        return args
    first = next((a for a in args if isinstance(a, Tensor)), None)
    if first is None:
        return args
    device_type = "cpu" if type(first._data) is np.ndarray else "cuda"
    st = state
    if not st.enabled[device_type]:
        return args
    policy = POLICY.get(op, (None, None))[_COLUMN[device_type]]
    if policy is None:
        return args
    target = st.dtype[device_type] if policy == LOWER else np.dtype(np.float32)
    return tuple(_cast(a, target, policy == LOWER, device_type) for a in args)


def _cast(a, target: np.dtype, lower: bool, device_type: str):
    if not isinstance(a, Tensor):
        return a
    dt = a._data.dtype
    if dt == target or not is_floating(dt) or dt == np.float64:
        return a
    if ("cpu" if type(a._data) is np.ndarray else "cuda") != device_type:
        return a
    st = state
    # PyTorch's heuristic: a float32 leaf that requires grad (a weight) is cast once per autocast region
    if lower and st.cache_enabled and dt == np.float32 and a._requires_grad and a._grad_fn is None and a._view is None:
        hit = st.cache.get(id(a))
        if hit is not None and hit[0]() is a and hit[1]._data.dtype == target:
            return hit[1]
        cast = a.to(_DTYPES[target])
        st.cache[id(a)] = (weakref.ref(a), cast)
        return cast
    return a.to(_DTYPES[target])


def clear_cache() -> None:
    """Forget the casts of weights kept for the current autocast region (leaving the outermost block does it).

    >>> clear_cache()
    """
    state.cache.clear()
