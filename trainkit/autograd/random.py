"""Random number streams: one seeded generator per device, reset by ``manual_seed``.

On the CPU a generator is PyTorch's: the MT19937 engine of ``mt19937`` with PyTorch's samplers (``distributions``),
so that ``trainkit.manual_seed(0); trainkit.randn(3)`` gives ``torch.randn(3)``'s numbers after
``torch.manual_seed(0)``, and its state is the 5056 bytes ``torch.get_rng_state()`` holds (one loads in the other).
On a GPU a generator is CuPy's own (its numbers are not PyTorch's CUDA numbers).

Code written for NumPy's ``Generator`` draws through ``generator.rng``: on the CPU an object with NumPy's method
names (``random``, ``standard_normal``, ``integers``, ``permutation``, ...) whose numbers are PyTorch's.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from collections.abc import Iterator

import numpy as np

from . import distributions as dist
from .backend import device, module_for
from .mt19937 import MT19937, STATE_SIZE
from .tensor import Tensor
from .user_warnings import warn_user

device_type = device  # the class, under a name that ``Generator(device=...)`` does not hide

__all__ = [
    "Generator",
    "TorchStream",
    "default_generator",
    "fork_rng",
    "generator_for",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "seed",
    "set_rng_state",
]

_U64 = 1 << 64


def _fresh_seed() -> int:
    """A nondeterministic 64-bit seed, as PyTorch takes from /dev/urandom."""
    return int.from_bytes(os.urandom(8), "little")


def _checked_seed(value) -> int:
    """``value`` as PyTorch's unsigned 64-bit seed: negative numbers wrap (-1 is 2^64 - 1)."""
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise RuntimeError(f"manual_seed expected a long, but got {type(value).__name__}")
    value = int(value)
    if not -(1 << 63) <= value < _U64:
        raise RuntimeError(
            f"Overflow when unpacking long long: the seed must be in [-0x8000_0000_0000_0000, "
            f"0xffff_ffff_ffff_ffff], got {value}"
        )
    return value % _U64


def _shape(size) -> tuple:
    if size is None:
        return ()
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)


class TorchStream:
    """NumPy ``Generator`` method names over PyTorch's CPU samplers, for code that draws through ``.rng``.

    ``random(size, dtype)`` is ``torch.rand``, ``standard_normal`` is ``torch.randn``, ``integers(low, high)`` is
    ``torch.randint``, ``permutation(n)`` is ``torch.randperm``; a ``size`` of None gives a Python number.

    >>> s = Generator().manual_seed(0).rng
    >>> round(float(s.random(dtype=np.float32)), 4)
    0.4963
    """

    def __init__(self, engine: MT19937):
        self.engine = engine

    @staticmethod
    def _out(values: np.ndarray, size):
        return values.reshape(()).item() if size is None else values

    def random(self, size=None, dtype=np.float64, out=None):
        values = dist.uniform(self.engine, _shape(size), dtype)
        if out is not None:
            out[...] = values
            return out
        return self._out(values, size)

    def uniform(self, low=0.0, high=1.0, size=None):
        return self._out(dist.uniform(self.engine, _shape(size), np.float64, low, high), size)

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        values = dist.normal(self.engine, _shape(size), dtype)
        if out is not None:
            out[...] = values
            return out
        return self._out(values, size)

    def normal(self, loc=0.0, scale=1.0, size=None):
        return self._out(dist.normal(self.engine, _shape(size), np.float64, loc, scale), size)

    def standard_exponential(self, size=None, dtype=np.float64):
        return self._out(dist.exponential(self.engine, _shape(size), dtype), size)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint: bool = False):
        if high is None:
            low, high = 0, low
        high = int(high) + bool(endpoint)
        return self._out(dist.random_from_to(self.engine, _shape(size), dtype, int(low), high), size)

    def permutation(self, x):
        if isinstance(x, (int, np.integer)):
            return dist.randperm(self.engine, int(x))
        x = np.asarray(x)
        return x[dist.randperm(self.engine, len(x))]

    def shuffle(self, x) -> None:
        x[...] = x[dist.randperm(self.engine, len(x))]

    def choice(self, a, size=None, replace: bool = True):
        n = int(a) if isinstance(a, (int, np.integer)) else len(a)
        shape = _shape(size)
        if replace:
            picks = dist.random_from_to(self.engine, shape, np.int64, 0, n)
        else:
            picks = dist.randperm(self.engine, n)[: math.prod(shape)].reshape(shape)
        picks = picks if isinstance(a, (int, np.integer)) else np.asarray(a)[picks]
        return self._out(np.asarray(picks), size)


class Generator:
    """A seeded source of random numbers for one device, as ``torch.Generator``.

    On the CPU it draws PyTorch's numbers: the same seed gives the same tensors as ``torch.Generator``, and
    ``get_state()`` is the byte tensor ``torch.Generator.get_state()`` returns (each loads the other's).

    >>> g = Generator().manual_seed(0)
    >>> g.initial_seed()
    0
    >>> import trainkit
    >>> trainkit.rand(2, generator=g)
    tensor([0.4963, 0.7682])
    """

    def __init__(self, device: str | device_type = "cpu"):
        self.device = device_type(device)
        self._engine: MT19937 | None = None
        self._seed = 0
        self._rng = None
        self.manual_seed(_fresh_seed())

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream from ``seed``; returns the generator itself."""
        self._seed = _checked_seed(seed)
        if self.device.type == "cpu":
            if self._engine is None:
                self._engine = MT19937(self._seed)
                self._rng = TorchStream(self._engine)
            else:
                self._engine.seed(self._seed)
        else:
            # folded below 2^63, the range CuPy's generators have always been seeded with here
            self._rng = module_for(self.device).random.default_rng(self._seed % (1 << 63))
        return self

    def seed(self) -> int:
        """Restart from a fresh nondeterministic seed and return it."""
        s = _fresh_seed()
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed this stream last started from."""
        return self._engine.initial_seed if self._engine is not None else self._seed

    @property
    def engine(self) -> MT19937 | None:
        """The MT19937 engine of a CPU generator (None on a GPU)."""
        return self._engine

    @property
    def rng(self):
        """NumPy-style draws: PyTorch's samplers on the CPU (``TorchStream``), CuPy's ``Generator`` on a GPU."""
        return self._rng

    def get_state(self):
        """The stream's state: on the CPU a uint8 tensor of PyTorch's 5056 bytes; on a GPU a uint8 tensor there
        holding a copy of the cuRAND generators' state (CuPy keeps it in a device array and has no public copy)."""
        if self._engine is None:
            return Tensor._make(self._rng.bit_generator._state.view("uint8").copy())
        return Tensor._make(np.frombuffer(self._engine.state_bytes(), dtype=np.uint8).copy())

    def set_state(self, new_state) -> Generator:
        """Continue from ``new_state``: one ``get_state`` gave, here or in PyTorch (a ``torch.ByteTensor``)."""
        if self._engine is None:
            state = self._rng.bit_generator._state
            array = new_state._data if isinstance(new_state, Tensor) else new_state
            if getattr(array, "nbytes", None) != state.nbytes:
                raise RuntimeError(f"a GPU generator's state is {state.nbytes} bytes, got {type(new_state).__name__}")
            state.view("uint8")[...] = array
            return self
        if isinstance(new_state, dict):
            # saved by an earlier trainkit, whose CPU stream was NumPy's: carry on from a seed derived from it
            digest = hashlib.sha256(repr(new_state).encode()).digest()
            self.manual_seed(int.from_bytes(digest[:8], "little"))
            warn_user(
                "this random state was saved by an earlier trainkit (a NumPy bit generator's); the CPU stream is now "
                "PyTorch's MT19937, so it restarts from a seed derived from the saved state: draws from here on "
                "differ from the run that saved it"
            )
            return self
        self._engine.load_state_bytes(_state_bytes(new_state))
        return self

    def __repr__(self) -> str:
        return f"<trainkit.Generator object on {self.device}>"


def _state_bytes(state) -> bytes:
    """The bytes of a state given as a trainkit or torch uint8 tensor, a NumPy array or bytes."""
    if isinstance(state, (bytes, bytearray, memoryview)):
        return bytes(state)
    array = np.asarray(state._data if isinstance(state, Tensor) else state)
    if array.dtype != np.uint8:
        raise TypeError(f"RNG state must be a torch.ByteTensor (uint8) of {STATE_SIZE} bytes, got dtype {array.dtype}")
    return array.reshape(-1).tobytes()


default_generator = Generator("cpu")
_cuda_generators: dict[int, Generator] = {}


def generator_for(dev: device, generator: Generator | None = None) -> Generator:
    """The generator to draw from for ``dev``: the one given, else that device's default stream."""
    if generator is not None:
        return generator
    if dev.type == "cpu":
        return default_generator
    index = dev.index or 0
    if index not in _cuda_generators:
        _cuda_generators[index] = Generator(device("cuda", index)).manual_seed(default_generator.initial_seed())
    return _cuda_generators[index]


def manual_seed(seed: int) -> Generator:
    """Seed every device's default stream so that runs repeat exactly; on the CPU the numbers are PyTorch's.

    >>> import trainkit
    >>> _ = trainkit.manual_seed(0); trainkit.randn(3)
    tensor([ 1.5410, -0.2934, -2.1788])
    """
    default_generator.manual_seed(int(seed))  # as torch.manual_seed, which takes int(seed)
    for g in _cuda_generators.values():
        g.manual_seed(default_generator.initial_seed())
    return default_generator


def seed() -> int:
    """Seed every default stream from fresh entropy; returns the seed used."""
    s = _fresh_seed()
    manual_seed(s)
    return s


def initial_seed() -> int:
    """The seed the CPU default stream last started from.

    >>> _ = manual_seed(7); initial_seed()
    7
    """
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The CPU default stream's state: PyTorch's 5056 bytes, so ``torch.set_rng_state`` takes it too.

    >>> get_rng_state().shape
    trainkit.Size([5056])
    """
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Continue the CPU default stream from ``new_state`` (``get_rng_state()`` here or in PyTorch)."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, device_type: str = "cuda") -> Iterator[None]:
    """Draws inside the block leave the default streams as they were before it (CPU, and the GPUs in use or
    ``devices``).

    >>> import trainkit
    >>> _ = trainkit.manual_seed(0)
    >>> with fork_rng():
    ...     _ = trainkit.rand(5)
    >>> trainkit.rand(1)
    tensor([0.4963])
    """
    if not enabled:
        yield
        return
    cpu_state = default_generator.get_state()
    wanted = None if devices is None else {device(d).index or 0 if not isinstance(d, int) else d for d in devices}
    gpu_states = {i: g.get_state() for i, g in _cuda_generators.items() if wanted is None or i in wanted}
    try:
        yield
    finally:
        default_generator.set_state(cpu_state)
        for i, state in gpu_states.items():
            _cuda_generators[i].set_state(state)
