"""In-place random fills, as PyTorch's ``Tensor.uniform_``, ``normal_``, ``bernoulli_``, ``exponential_`` and
``random_``, and ``bernoulli``. On the CPU the numbers are PyTorch's for the same seed (``autograd.distributions``);
on a GPU they come from CuPy's generator.

Each fill is a node whose output does not depend on the values it overwrites: the gradient that reaches it is
zero (``UniformBackward0`` and so on, as in PyTorch).
"""

from __future__ import annotations

import numpy as np

from .. import distributions as dist
from ..backend import device_of, kind_of, on_device, xp_of
from ..function import Op
from ..random import Generator, generator_for
from ..tensor import Tensor
from .inplace import apply_inplace
from .type_names import scalar_name

__all__ = [
    "bernoulli",
    "bernoulli_",
    "cauchy_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "normal_",
    "random_",
    "uniform_",
]


class RandomFill(Op, name="UniformBackward0"):
    """out = draw(shape, dtype), independent of x.   dx = 0."""

    allows_overlap = True

    def forward(self, x, draw):
        return draw(x)

    def backward(self, g):
        return g * 0


class NormalFill(RandomFill, name="NormalBackward0"):
    pass


class BernoulliFill(RandomFill, name="BernoulliBackward2"):
    pass


class ExponentialFill(RandomFill, name="ExponentialBackward0"):
    pass


class IntegerFill(RandomFill, name="RandomBackward2"):
    pass


class CauchyFill(RandomFill, name="CauchyBackward0"):
    pass


class LogNormalFill(RandomFill, name="LogNormalBackward0"):
    pass


class GeometricFill(RandomFill, name="GeometricBackward0"):
    pass


def _stream(t: Tensor, generator: Generator | None) -> Generator:
    return generator_for(t.device, generator)


def _require_float(t: Tensor, kernel: str) -> None:
    if kind_of(t._data.dtype) != "f":
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_name(t)}'")


def _fill(t: Tensor, cls, cpu, gpu, generator) -> Tensor:
    """Write ``cpu(engine, shape, dtype, contiguous, order)`` (``gpu(rng, shape, dtype)`` on a GPU) into ``t`` as
    node ``cls``; on the CPU ``shape`` lists t's axes in memory order (``order``), outermost first."""
    g = _stream(t, generator)

    def draw(x):
        if g.engine is not None:
            # PyTorch fills a view in the order of its memory (a transposed one column by column)
            order = sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis]))
            values = cpu(g.engine, tuple(x.shape[a] for a in order), x.dtype, bool(x.flags.c_contiguous), order)
            return values.transpose(np.argsort(order))
        with on_device(t.device):
            return xp_of(x).asarray(gpu(g.rng, x.shape, x.dtype), dtype=x.dtype)

    return apply_inplace(t, cls, draw=draw)


# the C++ names PyTorch's messages give integer dtypes (its kernels print the scalar type's typeid)
_C_NAMES = {
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
}


def _c_name(t: Tensor) -> str:
    return _C_NAMES.get(t._data.dtype.name, t._data.dtype.name)


def _float_work(dtype) -> type:
    return np.float64 if dtype == np.float64 else np.float32


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator: Generator | None = None, **kw) -> Tensor:
    """Fill with numbers drawn uniformly from [from, to) (``from`` may be given by name, as in PyTorch).

    >>> import trainkit
    >>> g = trainkit.Generator().manual_seed(0)
    >>> trainkit.empty(2).uniform_(-1, 1, generator=g)
    tensor([-0.0075,  0.5364])
    """
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kw))}'")
    _require_float(self, "check_uniform_bounds")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    return _fill(
        self,
        RandomFill,
        lambda e, shape, dt, *_: dist.uniform(e, shape, dt, from_, to),
        lambda rng, shape, dt: rng.random(shape, dtype=_float_work(dt)) * (to - from_) + from_,
        generator,
    )


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with numbers drawn from N(mean, std^2).

    >>> import trainkit
    >>> trainkit.empty(3).normal_(generator=trainkit.Generator().manual_seed(0))
    tensor([ 1.5410, -0.2934, -2.1788])
    """
    _require_float(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _fill(
        self,
        NormalFill,
        lambda e, shape, dt, contiguous, *_: dist.normal(e, shape, dt, mean, std, contiguous),
        lambda rng, shape, dt: rng.standard_normal(shape, dtype=_float_work(dt)) * std + mean,
        generator,
    )


def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with numbers drawn from the exponential distribution of rate ``lambd`` (density lambd * exp(-lambd x)).

    >>> import trainkit
    >>> bool((trainkit.empty(100).exponential_(2.0) >= 0).all())
    True
    """
    _require_float(self, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _fill(
        self,
        ExponentialFill,
        lambda e, shape, dt, *_: dist.exponential(e, shape, dt, lambd),
        lambda rng, shape, dt: rng.standard_exponential(shape, dtype=_float_work(dt)) / lambd,
        generator,
    )


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with numbers drawn from the Cauchy distribution, density sigma / (pi * ((x - median)^2 + sigma^2)).

    >>> import trainkit
    >>> trainkit.empty(4).cauchy_().shape
    trainkit.Size([4])
    """
    if kind_of(self._data.dtype) != "f":
        raise RuntimeError(
            "Cauchy distribution is a continuous probability distribution. dtype must be a floating point but you "
            f"specified {_c_name(self)}"
        )
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    return _fill(
        self,
        CauchyFill,
        lambda e, shape, dt, *_: dist.cauchy(e, shape, dt, median, sigma),
        lambda rng, shape, dt: median + sigma * rng.standard_cauchy(shape).astype(_float_work(dt)),
        generator,
    )


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None) -> Tensor:
    """Fill with numbers whose logarithm is normal with ``mean`` and ``std``: exp(N(mean, std^2)).

    >>> import trainkit
    >>> bool((trainkit.empty(100).log_normal_() > 0).all())
    True
    """
    _require_float(self, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    return _fill(
        self,
        LogNormalFill,
        lambda e, shape, dt, *_: dist.log_normal(e, shape, dt, mean, std),
        lambda rng, shape, dt: rng.lognormal(mean, std, shape).astype(_float_work(dt)),
        generator,
    )


def geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to and including the first success (1, 2, ...), in any dtype.

    >>> import trainkit
    >>> bool((trainkit.empty(100).geometric_(0.5) >= 1).all())
    True
    """
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    return _fill(
        self,
        GeometricFill,
        lambda e, shape, dt, *_: dist.geometric(e, shape, dt, p),
        lambda rng, shape, dt: rng.geometric(p, shape),
        generator,
    )


def random_(self: Tensor, from_: int | None = None, to: int | None = None, *, generator=None, **kw) -> Tensor:
    """Fill with integers: ``random_()`` over [0, 2^63) for int64 (0 .. 2^mantissa for floats), ``random_(to)``
    over [0, to), ``random_(from, to)`` over [from, to).

    >>> import trainkit
    >>> trainkit.zeros(4, dtype=trainkit.int64).random_(3, 5, generator=trainkit.Generator().manual_seed(0)).tolist()
    [3, 4, 4, 3]
    """
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kw))}'")
    if to is None and from_ is not None:
        from_, to = 0, from_
    if from_ is not None and from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    if from_ is None:
        cpu = lambda e, shape, dt, *_: dist.random_bits(e, shape, dt)  # noqa: E731
        top = 2**63 if kind_of(self._data.dtype) != "f" else 2**24
        gpu = lambda rng, shape, dt: rng.integers(0, min(top, 2**62), size=shape)  # noqa: E731
    else:
        cpu = lambda e, shape, dt, *_: dist.random_from_to(e, shape, dt, from_, to)  # noqa: E731
        gpu = lambda rng, shape, dt: rng.integers(from_, to, size=shape)  # noqa: E731
    return _fill(self, IntegerFill, cpu, gpu, generator)


def _check_p_tensor(p) -> None:
    xp = xp_of(p)
    if p.size and not bool(xp.all((p >= 0) & (p <= 1))):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")


def bernoulli_(self: Tensor, p=0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 1 where a uniform draw falls below ``p`` (a number, or a tensor broadcast to self), else 0.

    >>> import trainkit
    >>> trainkit.empty(5).bernoulli_(0.5, generator=trainkit.Generator().manual_seed(0)).tolist()
    [0.0, 0.0, 1.0, 0.0, 0.0]
    """
    if isinstance(p, Tensor):
        probs = p._data
        if kind_of(probs.dtype) != "f":
            raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{scalar_name(p)}'")
        _check_p_tensor(probs)

        def cpu(e, shape, dt, _, order):
            in_memory_order = np.broadcast_to(probs, self._data.shape).transpose(order)
            return dist.bernoulli_tensor(e, in_memory_order).astype(dt)

        def gpu(rng, shape, dt):
            return rng.random(shape, dtype=_float_work(probs.dtype)) < xp_of(probs).broadcast_to(probs, shape)

    else:
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")

        def cpu(e, shape, dt, *_):
            return dist.bernoulli_scalar(e, shape, p).astype(dt)

        def gpu(rng, shape, dt):
            return rng.random(shape) < p

    return _fill(self, BernoulliFill, cpu, gpu, generator)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Generator | None = None, out=None) -> Tensor:
    """0/1 draws: each element 1 with probability ``input``'s value there, or ``p`` when given, in ``input``'s
    dtype.

    >>> import trainkit
    >>> bernoulli(trainkit.tensor([0.0, 1.0, 1.0])).tolist()
    [0.0, 1.0, 1.0]
    """
    if p is None and kind_of(input._data.dtype) != "f":
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{scalar_name(input)}'")
    result = Tensor._make(xp_of(input._data).empty_like(input._data)) if out is None else out
    return bernoulli_(result, input.detach() if p is None else p, generator=generator)


def bernoulli_keep(shape: tuple, keep: float, like, generator: Generator | None = None):
    """A dropout mask for an array like ``like``: each element kept with probability ``keep`` and scaled by
    1 / keep, the rest 0; drawn as ``torch.empty(shape).bernoulli_(keep).div_(keep)`` draws it."""
    dt = like.dtype
    g = generator_for(device_of(like), generator)
    if g.engine is not None:
        mask = dist.bernoulli_scalar(g.engine, tuple(shape), keep).astype(dt)
        return mask / dt.type(keep)
    xp = xp_of(like)
    with on_device(device_of(like)):
        mask = xp.asarray(g.rng.random(tuple(shape)) < keep, dtype=dt)
    return mask / dt.type(keep)
