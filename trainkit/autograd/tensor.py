"""The Tensor: an array (NumPy or CuPy) plus what autograd needs to know about it.

What a tensor carries, and why:

- ``_data``: the array. Every op reads it; in-place ops write it.
- ``_requires_grad``, ``_grad_fn``, ``_output_nr``: its place in the graph. A tensor is a leaf when it has no
  ``grad_fn``; only leaves that require grad get ``.grad``.
- ``_version_counter``: a one-element list shared with ``detach()`` results and views (which share storage), bumped
  by every in-place op. Saved tensors remember the version they were saved at.
- ``_view``: for a tensor that shares its storage with another (a view), ``(base, op, params)``: what it is a
  view of and how to make it again, so that an in-place change through the view can be recorded on the base.
- ``_hooks`` (leaves only; a non-leaf's hooks live on its ``grad_fn``) and ``_acc``, a weak reference to the leaf's
  ``AccumulateGrad`` node, so that every op on the leaf reaches the same node without the leaf owning it.
"""

from __future__ import annotations

import copy
import warnings
import weakref

import numpy as np

from . import grad_mode
from .backend import (
    BFLOAT16_NP,
    SCALAR_NAMES,
    as_array,
    cuda_is_available,
    device,
    device_of,
    dtype,
    dtype_of,
    get_default_dtype,
    is_array,
    kind_of,
    to_device,
    to_dtype,
    xp_of,
)
from .hooks import HookDict, NodeHooks, add_hook
from .scalar_fit import stored_value

_new = object.__new__

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf "
    "Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure "
    "you access the leaf Tensor instead."
)


DETACH_VIEW_MESSAGE = (
    "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for training, "
    "and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence detach_() cannot be "
    "called on these gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution."
)


# Set by ops.view_replay: makes a view's grad_fn again after an in-place change of its base (views of a base share
# its version counter, so a view whose counter moved since its grad_fn was set may describe an older base).
view_refresher = None


def refresh_view(t: Tensor) -> None:
    """Bring a view's ``grad_fn`` and ``requires_grad`` up to date with in-place changes of its base."""
    if t._view is not None and t._view_version != t._version_counter[0] and view_refresher is not None:
        view_refresher(t)


class Size(tuple):
    """A tensor's shape: a tuple that prints as ``trainkit.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"trainkit.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def flatten_sizes(sizes) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` both mean shape (2, 3), as in PyTorch."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return tuple(int(s) for s in sizes)


class Tensor:
    """A multi-dimensional array that can record the operations on it for automatic differentiation.

    >>> import trainkit
    >>> x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
    """

    __array_ufunc__ = None  # ndarray (op) Tensor defers to Tensor's reflected operator

    # Defaults on the class: an op result sets only what differs, which is most of the cost of making one.
    _requires_grad = False
    _grad_fn = None
    _output_nr = 0
    _grad = None
    _hooks = None
    _acc = None
    _view = None
    _no_grad_view = 0  # 1: a view made in no_grad mode, 2: a view of one
    _view_version = 0  # a view's grad_fn is current while the version counter still reads this
    _post_accumulate_hooks = None

    @staticmethod
    def _make(data, requires_grad=False, grad_fn=None, output_nr=0, counter=None) -> Tensor:
        """Wrap an array without copying or checking it: the constructor of every op result."""
        t = _new(Tensor)
        t._data = data
        t._version_counter = [0] if counter is None else counter
        if requires_grad:
            t._requires_grad = True
            t._grad_fn = grad_fn
            if output_nr:
                t._output_nr = output_nr
        return t

    def __init__(self, *args):
        """``Tensor([1, 2])`` copies data as float32; ``Tensor(2, 3)`` makes an uninitialised 2x3 float tensor."""
        dt = get_default_dtype().np
        if not args:  # Tensor(): an empty vector, as in PyTorch
            args = (0,)
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, Tensor):
                data = data._data
            array = np.array(data, dtype=dt) if not is_array(data) else data.astype(dt)
        else:
            array = np.empty(flatten_sizes(args), dtype=dt)
        self._data = array
        self._requires_grad = False
        self._grad_fn = None
        self._output_nr = 0
        self._grad = None
        self._version_counter = [0]
        self._hooks = None
        self._acc = None
        self._view = None

    # ----------------------------------------------------------------------------------------------- attributes
    @property
    def data(self) -> Tensor:
        """The same storage, detached, with a version counter of its own: changes through it are not tracked."""
        return Tensor._make(self._data)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        self._data = value._data

    @property
    def requires_grad(self) -> bool:
        if self._requires_grad or self._view is None:
            return self._requires_grad
        base = self._view[0]  # a view requires grad when the tensor it looks into does, as in PyTorch
        while base._view is not None:
            base = base._view[0]
        return base._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._grad_fn is not None:  # unlike requires_grad_(True), the setter refuses non-leaves outright
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place on a leaf (the way to freeze or unfreeze it); returns self."""
        requires_grad = bool(requires_grad)
        if self._grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if requires_grad and kind_of(self._data.dtype) != "f":
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients (this one is {self.dtype})")
        self._requires_grad = requires_grad
        # a no-op on a leaf, but every op on it reads them, and reads that fall through to the class cost several
        # times as much (Python 3.11 specialises reads of instance attributes only)
        self._grad_fn = None
        self._output_nr = 0
        return self

    @property
    def is_leaf(self) -> bool:
        refresh_view(self)
        return self._grad_fn is None

    @property
    def grad_fn(self):
        refresh_view(self)
        return self._grad_fn

    @property
    def grad(self) -> Tensor | None:
        if self._grad_fn is not None and self._grad is None and not self.retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: grad {tuple(value.shape)}, tensor {tuple(self.shape)}"
                )
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(f"assigned grad has data of a different type: {value.dtype} vs {self.dtype}")
            if type(value._data) is not type(self._data):
                raise RuntimeError(f"assigned grad is on {value.device} but the tensor is on {self.device}")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        fn = self._grad_fn
        if fn is None or fn._hooks is None:
            return False
        ref = fn._hooks.retain.get(self._output_nr)
        return ref is not None and ref() is self

    @property
    def _base(self) -> Tensor | None:
        """The tensor this one is a view of (None when it owns its storage)."""
        return None if self._view is None else self._view[0]

    @property
    def _version(self) -> int:
        return self._version_counter[0]

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or the length of dimension ``dim``."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[self._dim(dim)]

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def dtype(self) -> dtype:
        return dtype_of(self._data.dtype)

    @property
    def device(self) -> device:
        return device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return kind_of(self._data.dtype) == "f"

    def _dim(self, dim: int) -> int:
        """``dim`` made non-negative, with PyTorch's error when out of range."""
        n = max(self._data.ndim, 1)
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return dim % n

    # ------------------------------------------------------------------------------------------------- autograd
    def retain_grad(self) -> None:
        """Keep this non-leaf's gradient in ``.grad`` during backward (a no-op on leaves)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is not None:
            self._grad_fn._hooks_or_new().retain[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor replaces the gradient.

        >>> import trainkit
        >>> x = trainkit.ones(2, requires_grad=True)
        >>> h = x.register_hook(lambda g: g * 10)
        >>> x.sum().backward(); x.grad
        tensor([10., 10.])
        >>> h.remove()
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is None:
            if self._hooks is None:
                # share the hooks of a live AccumulateGrad, which may already hold pre-hooks of its own
                acc = self._acc() if self._acc is not None else None
                self._hooks = acc._hooks_or_new() if acc is not None else NodeHooks()
            hooks = self._hooks
            nr = 0
        else:
            hooks = self._grad_fn._hooks_or_new()
            nr = self._output_nr
        return add_hook(hooks.tensor.setdefault(nr, HookDict()), hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a leaf's ``.grad`` has been accumulated (optimizer-in-backward style)."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = HookDict()
        return add_hook(self._post_accumulate_hooks, hook)

    def detach(self) -> Tensor:
        """A leaf that shares storage and version counter with this tensor and never requires grad."""
        return Tensor._make(self._data, False, None, 0, self._version_counter)

    def detach_(self) -> Tensor:
        """Make this tensor a leaf that does not require grad, in place."""
        if self._view is not None:  # PyTorch refuses any view, whether or not it is in a graph
            raise RuntimeError(DETACH_VIEW_MESSAGE)
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    # ----------------------------------------------------------------------------------------------- conversion
    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.item()

    def tolist(self):
        return self._data.tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The NumPy array behind a CPU tensor (shared, not copied)."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if xp_of(self._data) is not np:
            if not force:
                raise TypeError(
                    f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                    "tensor to host memory first."
                )
            return self._data.get()
        return self._data

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device_index: int | str | None = None) -> Tensor:
        if isinstance(device_index, (str, device)):
            return self.to(device_index)
        return self.to(device("cuda", device_index or 0))

    def pin_memory(self, device: str | None = None) -> Tensor:
        """A copy of a CPU tensor for fast copies to the GPU (``x.pin_memory().to("cuda", non_blocking=True)``), as
        torch's; CuPy copies from the NumPy array as it is. Without a GPU, torch's error.

        >>> import trainkit
        >>> trainkit.ones(2).pin_memory().device if trainkit.cuda.is_available() else "no GPU"  # doctest: +SKIP
        device(type='cpu')
        """
        if not cuda_is_available():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        return self.clone()

    def float(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.float32)))

    def double(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.float64)))

    def half(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.float16)))

    def bfloat16(self) -> Tensor:
        return self.to(dtype_of(BFLOAT16_NP))

    def long(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.int64)))

    def int(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.int32)))

    def short(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.int16)))

    def bool(self) -> Tensor:
        return self.to(dtype_of(np.dtype(np.bool_)))

    def type(self, dtype=None):
        """Without an argument, the type name ('trainkit.FloatTensor'); with one, this tensor in that dtype."""
        if dtype is None:
            prefix = "trainkit.cuda." if self.is_cuda else "trainkit."
            return f"{prefix}{SCALAR_NAMES[self.dtype.name]}Tensor"
        if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), type(self.dtype)):
            dtype = dtype.dtype  # a legacy type: x.type(trainkit.LongTensor)
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            names = {
                "Float": "float32",
                "Double": "float64",
                "Half": "float16",
                "Long": "int64",
                "Int": "int32",
                "Short": "int16",
                "Char": "int8",
                "Byte": "uint8",
                "Bool": "bool",
            }
            dtype = names[dtype.rsplit(".", 1)[-1][: -len("Tensor")]]
        return self.to(to_dtype(dtype))

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def is_contiguous(self) -> bool:
        return bool(self._data.flags.c_contiguous)

    def _new_filled(self, fill, sizes, dtype, requires_grad) -> Tensor:
        xp = xp_of(self._data)
        dt = self._data.dtype if dtype is None else to_dtype(dtype).np
        t = Tensor._make(xp.full(flatten_sizes(sizes), stored_value(fill, dt), dtype=dt))
        return t.requires_grad_(requires_grad) if requires_grad else t

    def new_zeros(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new_filled(0, size, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new_filled(1, size, dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False) -> Tensor:
        return self._new_filled(fill_value, (size,), dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False) -> Tensor:
        return self._new_filled(0, size, dtype, requires_grad)

    # ------------------------------------------------------------------------------------------ Python protocol
    def __repr__(self) -> str:
        return _format(self)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        # as PyTorch: the rows come from one unbind, so each has UnbindBackward0 as its grad_fn
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} values is ambiguous")
        return bool(self._data.item())

    def _scalar(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._data.item()

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __format__(self, format_spec: str) -> str:
        if self._data.ndim == 0:  # a 0-d tensor formats as its number: f"{loss:.4f}"
            return self._data.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.item())

    __hash__ = object.__hash__

    def __reduce_ex__(self, protocol):
        return (
            _rebuild,
            (np.asarray(to_device(self._data, device("cpu"))), self._requires_grad and self.is_leaf, str(self.device)),
        )

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol; "
                "deepcopy x.detach() instead."
            )
        new = type(self).__new__(type(self))
        Tensor.__init__(new, 0)
        new._data = self._data.copy()
        new._requires_grad = self._requires_grad
        if self._grad is not None:
            new._grad = Tensor._make(self._grad._data.copy())
        if hasattr(self, "__dict__"):
            new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = new
        return new


def _rebuild(array, requires_grad: bool, dev: str) -> Tensor:
    t = Tensor._make(to_device(array, device(dev)))
    t._requires_grad = requires_grad
    return t


def _format(t: Tensor) -> str:
    array = np.asarray(to_device(t._data, device("cpu")))
    shown = array.astype(np.float32) if array.dtype == BFLOAT16_NP else array  # NumPy prints bfloat16 unformatted
    options: dict = {}
    if kind_of(array.dtype) == "f" and array.size:
        finite = np.abs(shown[np.isfinite(shown)])
        nonzero = finite[finite != 0]
        if nonzero.size and (nonzero.max() >= 1e8 or nonzero.min() < 1e-4):
            options["formatter"] = {"float": "{:.4e}".format}
        elif bool(np.all(finite == np.round(finite))):
            options["floatmode"] = "unique"
        else:
            options.update(floatmode="fixed", precision=4)
    body = np.array2string(shown, separator=", ", prefix="tensor(", **options)
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if array.dtype not in (get_default_dtype().np, np.dtype(np.int64), np.dtype(np.bool_)):
        extras.append(f"dtype={t.dtype}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    if array.size == 0 and array.ndim > 1:
        extras.insert(0, f"size={tuple(array.shape)}")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def is_tensor(obj) -> bool:
    """True when ``obj`` is a trainkit Tensor (Parameters included)."""
    return isinstance(obj, Tensor)


def unwrap(value):
    """The array behind a Tensor, or ``value`` itself."""
    return value._data if isinstance(value, Tensor) else value


__all__ = ["Size", "Tensor", "is_tensor", "as_array", "grad_mode"]
