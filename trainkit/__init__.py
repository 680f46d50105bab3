"""trainkit: a teachable, hackable deep-learning framework on its own autograd core.

PyTorch's names with PyTorch's behaviour: ``import trainkit as torch`` runs autograd code written for it.
"""

__version__ = "0.1.0"

from . import autograd, cuda  # noqa: E402
from .autograd.backend import (  # noqa: E402
    bool_ as bool,
)
from .autograd.backend import (
    device,
    dtype,
    float16,
    float32,
    float64,
    get_default_device,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_device,
    set_default_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .autograd.creation import (  # noqa: E402
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .autograd.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: E402
from .autograd.ops.activation import log_softmax, logsumexp, relu, sigmoid, softmax, tanh  # noqa: E402
from .autograd.ops.copy import clone  # noqa: E402
from .autograd.ops.linalg import bmm, dot, matmul, mm, mv, trace  # noqa: E402
from .autograd.ops.math import (  # noqa: E402
    abs,
    absolute,
    add,
    all,
    allclose,
    any,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    div,
    divide,
    eq,
    equal,
    exp,
    floor_divide,
    ge,
    gt,
    isfinite,
    isnan,
    le,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    mul,
    multiply,
    ne,
    neg,
    negative,
    pow,
    reciprocal,
    remainder,
    rsub,
    sign,
    sqrt,
    sub,
    subtract,
    true_divide,
    where,
)
from .autograd.ops.reduction import (  # noqa: E402
    amax,
    amin,
    argmax,
    argmin,
    count_nonzero,
    max,
    mean,
    min,
    nanmean,
    nansum,
    std,
    std_mean,
    sum,
    var,
    var_mean,
)
from .autograd.ops.sampling import bernoulli, multinomial  # noqa: E402
from .autograd.ops.shape import (  # noqa: E402
    cat,
    chunk,
    concat,
    concatenate,
    flatten,
    reshape,
    split,
    squeeze,
    stack,
    swapaxes,
    swapdims,
    t,
    transpose,
    unbind,
    unsqueeze,
)
from .autograd.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402
from .autograd.tensor import Size, Tensor, is_tensor  # noqa: E402

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16


def is_floating_point(input: Tensor) -> bool:  # noqa: A002
    """True for tensors of a floating dtype."""
    return input.is_floating_point()


def numel(input: Tensor) -> int:  # noqa: A002
    """The number of elements of ``input``."""
    return input.numel()


from . import backends, data, datasets, hub, jit, layers, nn, onnx, optim, random, testing, transforms, utils  # noqa: E402
from .amp import (  # noqa: E402  (binds trainkit.amp too)
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .autograd.backend import bfloat16, finfo  # noqa: E402
from .autograd.ops import rearrange as _rearrange  # noqa: E402
from .autograd.ops import shape as _shape  # noqa: E402
from .autograd.ops.cumulative import cumprod, cumsum, prod  # noqa: E402
from .autograd.ops.einsum import einsum, outer  # noqa: E402
from .autograd.ops.elementwise import (  # noqa: E402
    addcdiv,
    addcmul,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    erf,
    exp2,
    expm1,
    floor,
    fmod,
    frac,
    isclose,
    isinf,
    lerp,
    log1p,
    log2,
    log10,
    round,
    rsqrt,
    square,
    trunc,
)
from .autograd.ops.gather_scatter import gather, index_select, scatter, scatter_add, scatter_reduce, take_along_dim  # noqa: E402
from .autograd.ops.join import hstack, vstack  # noqa: E402
from .autograd.ops.masking import argwhere, masked_fill, masked_select, nonzero  # noqa: E402
from .autograd.ops.norm import dist, norm  # noqa: E402
from .autograd.ops.rearrange import fliplr, flipud, moveaxis, movedim, narrow, roll, select  # noqa: E402


def flip(input: Tensor, dims) -> Tensor:  # noqa: A002
    """``input`` reversed along ``dims`` (a tuple or list; ``Tensor.flip`` also takes them one by one).

    >>> flip(tensor([1, 2, 3]), (0,))
    tensor([3, 2, 1])
    """
    return _rearrange.flip(input, *_dims_tuple("flip", dims))


def tile(input: Tensor, dims) -> Tensor:  # noqa: A002
    """``input`` repeated ``dims`` times along each dimension (a tuple or list).

    >>> tile(tensor([1, 2]), (2,))
    tensor([1, 2, 1, 2])
    """
    return _rearrange.tile(input, *_dims_tuple("tile", dims))


def permute(input: Tensor, dims) -> Tensor:  # noqa: A002
    """``input`` with its dimensions in the order ``dims`` (a tuple or list).

    >>> permute(zeros(2, 3), (1, 0)).shape
    trainkit.Size([3, 2])
    """
    return _shape.permute(input, *_dims_tuple("permute", dims))


def _dims_tuple(name: str, dims) -> tuple:
    """torch's function forms take the dims as one sequence (the methods take them one by one too)."""
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"{name}(): argument 'dims' (position 2) must be tuple of ints, not {type(dims).__name__}")
    return tuple(dims)


from . import accelerator, func, multiprocessing  # noqa: E402  (torch.accelerator, torch.func, torch.multiprocessing)
from .autograd.ops.more_math import (  # noqa: E402
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    asinh,
    atanh,
    deg2rad,
    erfc,
    fix,
    logit,
    nan_to_num,
    positive,
    rad2deg,
    sgn,
    signbit,
    xlogy,
)
from .autograd.ops.sorting import argsort, sort, topk  # noqa: E402
from .autograd.ops.triangular import diag, diagonal, tril, triu  # noqa: E402
from .autograd.ops.trigonometric import acos, asin, atan, atan2, cos, cosh, sin, sinh, tan  # noqa: E402
from .autograd.out import wrap_namespace as _wrap_namespace  # noqa: E402
from .autograd.tensor_types import (  # noqa: E402
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .compiler import compile  # noqa: E402
from .functional.cdist import cdist  # noqa: E402
from .layers.summary import summary  # noqa: E402
from .runtime import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_num_threads,
    use_deterministic_algorithms,
)
from .serialization import load, save  # noqa: E402
from .trainer import Trainer  # noqa: E402

# Last, once every name is bound: the functions that take PyTorch's out= keyword get it (methods do not take it).
_wrap_namespace(globals())
