"""The differential tester's core: build the same seeded inputs for trainkit and torch, call, compare, record.

A case is one call of one op (``Case``): a function ``fn(L, *args, **kwargs)`` where ``L`` is the library module
(``trainkit`` or ``torch``), and arguments in which tensor specs (``T``) and dtype markers (``D``) stand for
tensors and dtypes of that library. The inputs of a case are drawn from a NumPy generator seeded by the case id,
so a case id names the same call in every run, whatever the sample around it.

``compare(case)`` runs the case on both libraries and returns a ``Record``: the kinds of disagreement found, in
``KINDS`` order (an empty list when the two agree), and a one-line detail of the first.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("raises", "exception class", "shape", "dtype", "value", "requires_grad", "grad_fn", "grad")

# The exception classes told apart; a subclass is named by the first class of this list it belongs to, so
# NotImplementedError (a RuntimeError) and IndexError come first.
EXCEPTION_CLASSES = (NotImplementedError, IndexError, TypeError, ValueError, RuntimeError)

# Relative and absolute tolerance by result dtype: float32 work is done in a different order (and at times in
# float64) by NumPy and by torch's kernels.
TOLERANCES = {"float16": (1e-2, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}

NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i64": np.int64, "b": np.bool_}
LIB_DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "i64": "int64", "b": "bool"}

EDGE_FLOATS = {
    "f32": [0.0, -0.0, 1.0, -1.0, 3e38, -3e38, 1e-30, -1e-30, math.inf, -math.inf, math.nan],
    "f64": [0.0, -0.0, 1.0, -1.0, 1e300, -1e300, 1e-300, -1e-300, math.inf, -math.inf, math.nan],
}
EDGE_INTS = [0, 1, -1, 2**31 + 7, -(2**31) - 7]


@dataclass(frozen=True)
class T:
    """A tensor argument: shape, dtype (``f32 f64 i64 b``), layout and value domain.

    ``layout``: ``c`` contiguous, ``T`` transposed (last two dims), ``s`` step-sliced (every other element of
    the last dim), ``e`` expanded (dim 0 broadcast from 1). ``domain``: ``any`` (normal values), ``pos``
    (positive), ``unit`` (inside (-1, 1)), ``edge`` (a mix of 0, -0.0, ±1, huge, tiny, ±inf, nan),
    ``idx`` (integers in ``[lo, hi)``), ``prob`` (inside (0, 1)). ``grad``: the leaf requires grad (floating
    dtypes only). ``value``: fixed contents instead of drawn ones.
    """

    shape: tuple = ()
    dtype: str = "f32"
    layout: str = "c"
    domain: str = "any"
    grad: bool = True
    lo: int = 0
    hi: int = 3
    value: Any = None

    def tag(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.layout != "c":
            text += "." + self.layout
        if self.domain == "idx":
            text += f"<{self.lo}:{self.hi}>"
        elif self.domain != "any":
            text += "+" + self.domain
        if self.value is not None:
            text += "=" + repr(self.value).replace(" ", "")
        if not self.grad and self.dtype in ("f32", "f64", "f16"):
            text += "~"
        return text


@dataclass(frozen=True)
class D:
    """A dtype argument: ``D("float64")`` is ``torch.float64`` or ``trainkit.float64``."""

    name: str

    def tag(self) -> str:
        return self.name


@dataclass
class Case:
    op: str
    cid: str
    fn: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    values: bool = True  # compare values (False for random ops: shape, dtype and grads only)


@dataclass
class Record:
    op: str
    cid: str
    kinds: list
    detail: str = ""

    @property
    def agrees(self) -> bool:
        return not self.kinds

    @property
    def kind(self) -> str:
        return self.kinds[0] if self.kinds else ""


def describe(value) -> str:
    """The text of an argument in a case id: short, stable, free of memory addresses."""
    if isinstance(value, (T, D)):
        return value.tag()
    if isinstance(value, list):
        return "[" + ",".join(describe(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ",".join(describe(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, slice):
        parts = ["" if p is None else describe(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts) if value.step is not None else ":".join(parts[:2])
    if value is Ellipsis:
        return "..."
    if isinstance(value, range):
        return f"range({value.start},{value.stop},{value.step})"
    if isinstance(value, float):
        return repr(value)
    return repr(value).replace(" ", "")


def seed_of(text: str) -> int:
    return zlib.crc32(text.encode())


# --- inputs -------------------------------------------------------------------------------------------------


def draw(spec: T, rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """The values of one tensor argument, as a NumPy array of ``shape`` and the spec's dtype."""
    dtype = NP_DTYPES[spec.dtype]
    if spec.value is not None:
        return np.array(spec.value, dtype=dtype).reshape(shape)
    if spec.dtype == "b":
        return rng.random(shape) < 0.5
    if spec.dtype == "i64":
        if spec.domain == "idx":
            return rng.integers(spec.lo, max(spec.hi, spec.lo + 1), shape).astype(np.int64)
        if spec.domain == "pos":
            return rng.integers(1, 6, shape).astype(np.int64)
        if spec.domain == "edge":
            return rng.choice(np.array(EDGE_INTS, dtype=np.int64), shape)
        return rng.integers(-4, 6, shape).astype(np.int64)
    if spec.domain == "pos":
        values = np.abs(rng.standard_normal(shape)) * 2 + 0.1
    elif spec.domain == "unit":
        values = rng.uniform(-0.95, 0.95, shape)
    elif spec.domain == "prob":
        values = rng.uniform(0.05, 0.95, shape)
    elif spec.domain == "idx":
        values = rng.integers(spec.lo, spec.hi, shape)
    elif spec.domain == "edge":
        values = rng.standard_normal(shape) * 2
        edges = np.array(EDGE_FLOATS.get(spec.dtype, EDGE_FLOATS["f32"]))
        pick = rng.random(shape) < 0.6
        values = np.where(pick, rng.choice(edges, shape), values)
    else:
        values = rng.standard_normal(shape) * 2
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(dtype)


def base_shape(spec: T) -> tuple:
    """The shape of the leaf a spec's tensor is a view of."""
    shape = tuple(spec.shape)
    if spec.layout == "T" and len(shape) >= 2:
        return shape[:-2] + (shape[-1], shape[-2])
    if spec.layout == "s" and len(shape) >= 1:
        return shape[:-1] + (2 * shape[-1],)
    if spec.layout == "e" and len(shape) >= 1:
        return (1,) + shape[1:]
    return shape


@dataclass
class Drawn:
    """The arrays drawn for one case: each spec's leaf values, in the order the specs are met."""

    arrays: list


def draw_case(case: Case) -> Drawn:
    rng = np.random.default_rng(seed_of(case.cid))
    arrays: list = []

    def visit(value):
        if isinstance(value, T):
            arrays.append(draw(value, rng, base_shape(value)))
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)

    visit(case.args)
    visit(case.kwargs)
    return Drawn(arrays)


def build(case: Case, drawn: Drawn, lib) -> tuple[tuple, dict, list]:
    """The case's arguments for ``lib``, and the leaves that require grad (whose grads are compared)."""
    arrays = iter(drawn.arrays)
    leaves: list = []

    def make(value):
        if isinstance(value, T):
            array = next(arrays)
            requires = value.grad and value.dtype in ("f32", "f64", "f16")
            leaf = lib.tensor(array.copy(), dtype=getattr(lib, LIB_DTYPES[value.dtype]), requires_grad=requires)
            if requires:
                leaves.append(leaf)
            if value.layout == "T" and len(value.shape) >= 2:
                return leaf.transpose(-1, -2)
            if value.layout == "s" and len(value.shape) >= 1:
                return leaf[..., ::2]
            if value.layout == "e" and len(value.shape) >= 1:
                return leaf.expand(*value.shape)
            return leaf
        if isinstance(value, D):
            return getattr(lib, value.name)
        if isinstance(value, list):
            return [make(v) for v in value]
        if isinstance(value, tuple):
            return tuple(make(v) for v in value)
        if isinstance(value, dict):
            return {k: make(v) for k, v in value.items()}
        return value

    args = make(case.args)
    kwargs = make(case.kwargs)
    return args, kwargs, leaves


# --- outputs ------------------------------------------------------------------------------------------------


def is_tensor(value) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "requires_grad") and hasattr(value, "detach")


def flatten(out) -> list:
    """The leaves of a result: tensors, and plain values (sizes, dtypes and Python scalars as text or tuples)."""
    if is_tensor(out):
        return [out]
    if isinstance(out, tuple) and all(isinstance(v, int) for v in out) and type(out).__name__ == "Size":
        return [("size", tuple(out))]
    if isinstance(out, (tuple, list)):
        items: list = [("len", type(out).__name__ if isinstance(out, list) else "tuple", len(out))]
        for v in out:
            items.extend(flatten(v))
        return items
    if type(out).__name__ == "dtype":
        return [("dtype", str(out).rsplit(".", 1)[-1])]
    if isinstance(out, np.ndarray):
        return [("ndarray", str(out.dtype), out.shape, out)]
    if isinstance(out, float) and math.isnan(out):
        return [("nan",)]
    return [("value", type(out).__name__, out)]


def dtype_name(dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def node_name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def to_array(t) -> np.ndarray:
    if getattr(t, "_is_zerotensor", None) is not None and t._is_zerotensor():
        # torch gives some zero gradients (sgn's) as a ZeroTensor, which converts to NumPy only when forced
        return np.asarray(t.detach().numpy(force=True))
    return np.asarray(t.detach().cpu().numpy()) if hasattr(t, "cpu") else np.asarray(t.detach().numpy())


def same_values(got: np.ndarray, want: np.ndarray, dtype: str) -> bool:
    """Equal within the dtype's tolerance; NaN equals NaN, infinities must match exactly."""
    if got.shape != want.shape:
        return False
    if got.size == 0:
        return True
    if dtype in TOLERANCES and (got.dtype.kind == "f" or want.dtype.kind == "f"):
        rtol, atol = TOLERANCES[dtype]
        a, b = got.astype(np.float64), want.astype(np.float64)
        return bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))
    return bool(np.array_equal(got, want))


def exception_class(err: BaseException) -> str:
    for cls in EXCEPTION_CLASSES:
        if isinstance(err, cls):
            return cls.__name__
    return type(err).__name__


def call(fn, *args, **kwargs):
    """``(result, None)`` or ``(None, exception)``; warnings are silenced (both libraries warn alike)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), None
    except Exception as err:  # noqa: BLE001  (any exception is a result to compare)
        return None, err


def short(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text[:100]}"


# --- the comparison -----------------------------------------------------------------------------------------


def compare(case: Case, lib, ref) -> Record:
    """Run ``case`` on ``lib`` (trainkit) and on ``ref`` (torch) and record where they disagree."""
    found: dict[str, str] = {}

    def note(kind: str, detail: str) -> None:
        found.setdefault(kind, detail)

    drawn = draw_case(case)
    built = {}
    results = {}
    for name, module in (("lib", lib), ("ref", ref)):
        (args, kwargs, leaves), err = call(build, case, drawn, module)
        if err is not None:  # building the inputs needs tensor(), transpose, slicing and expand to work
            results[name] = (None, err)
            built[name] = []
            continue
        built[name] = leaves
        results[name] = call(case.fn, module, *args, **kwargs)

    (out, err), (ref_out, ref_err) = results["lib"], results["ref"]
    if err is not None or ref_err is not None:
        if err is None:
            note("raises", f"torch raises {short(ref_err)}; trainkit returns")
        elif ref_err is None:
            note("raises", f"trainkit raises {short(err)}; torch returns")
        elif exception_class(err) != exception_class(ref_err):
            note("exception class", f"trainkit {short(err)}; torch {short(ref_err)}")
        return finish(case, found)

    (got, err), want = call(flatten, out), flatten(ref_out)
    tol = loosest(case, ref_out)
    if err is not None:
        note("value", f"reading trainkit's result raised {short(err)}")
        return finish(case, found)
    if len(got) != len(want):
        note("shape", f"{len(got)} results, torch {len(want)}")
        return finish(case, found)
    pairs = []
    for i, (a, b) in enumerate(zip(got, want)):
        where = f"result {i}" if len(got) > 1 else "result"
        if is_tensor(a) != is_tensor(b):
            note("value", f"{where}: {type(a).__name__} vs torch {type(b).__name__}")
            continue
        if not is_tensor(a):
            compare_plain(a, b, where, note, tol)
            continue
        compare_tensors(a, b, where, case.values, note, tol)
        pairs.append((a, b))

    try:
        compare_backward(case, pairs, built["lib"], built["ref"], lib, ref, note, tol)
    except Exception as err:  # noqa: BLE001  (reading trainkit's gradients failed)
        note("grad", f"reading the gradients raised {short(err)}")
    return finish(case, found)


def compare_plain(a, b, where: str, note, tol: str) -> None:
    """Results that are not tensors: sizes, dtypes, lengths, NumPy arrays, Python scalars and lists."""
    if a[0] != b[0]:
        note("value", f"{where}: {a!r} vs torch {b!r}"[:200])
    elif a[0] == "dtype" and a != b:
        note("dtype", f"{where}: {a[1]} vs torch {b[1]}")
    elif a[0] == "ndarray":
        if a[1] != b[1]:
            note("dtype", f"{where}: ndarray {a[1]} vs torch {b[1]}")
        elif not same_values(a[3], b[3], tol if a[3].dtype.kind == "f" else a[1]):
            note("value", f"{where}: ndarray {a[3].ravel()[:4]} vs torch {b[3].ravel()[:4]}")
    elif a[0] == "value" and not plain_equal(a[2], b[2]):
        note("value", f"{where}: {a[2]!r} vs torch {b[2]!r}"[:200])
    elif a[0] == "value" and a[1] != b[1]:
        note("dtype", f"{where}: {a[1]} vs torch {b[1]}")
    elif a[0] != "value" and a != b:
        note("value", f"{where}: {a!r} vs torch {b!r}"[:200])


def plain_equal(a, b) -> bool:
    """Python values equal, with NaN equal to NaN and the element types of lists compared."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(plain_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def loosest(case: Case, ref_out) -> str:
    """The least precise floating dtype among a case's tensor arguments and torch's results: its tolerance
    applies to every floating comparison of the case (float32 rounding carries into float64 results)."""
    names = set()

    def visit(value):
        if isinstance(value, T):
            names.add(LIB_DTYPES[value.dtype])
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)

    visit(case.args)
    visit(case.kwargs)
    names.update(dtype_name(t.dtype) for t in flatten(ref_out) if is_tensor(t))
    return next((n for n in ("float16", "float32") if n in names), "float64")


def compare_tensors(a, b, where: str, values: bool, note, tol: str = "float64") -> None:
    for kind, check in (
        ("shape", check_shape),
        ("dtype", check_dtype),
        ("value", check_values),
        ("requires_grad", check_requires_grad),
        ("grad_fn", check_grad_fn),
    ):
        if kind == "value" and not values:
            continue
        try:
            if not (check(a, b, where, note, tol) if kind == "value" else check(a, b, where, note)):
                return
        except Exception as err:  # noqa: BLE001  (reading trainkit's result failed: a disagreement of that kind)
            note(kind, f"{where}: reading the {kind} raised {short(err)}")
            return


def check_shape(a, b, where, note) -> bool:
    if tuple(a.shape) != tuple(b.shape):
        note("shape", f"{where}: shape {tuple(a.shape)} vs torch {tuple(b.shape)}")
        return False
    return True


def check_dtype(a, b, where, note) -> bool:
    dt, rdt = dtype_name(a.dtype), dtype_name(b.dtype)
    if dt != rdt:
        note("dtype", f"{where}: {dt} vs torch {rdt}")
    return True


def check_values(a, b, where, note, tol) -> bool:
    x, y = to_array(a), to_array(b)
    if not same_values(x, y, tol if y.dtype.kind == "f" else dtype_name(b.dtype)):
        note(
            "value",
            f"{where}: {np.array2string(x.ravel()[:4], precision=4)} vs torch "
            f"{np.array2string(y.ravel()[:4], precision=4)}",
        )
    return True


def check_requires_grad(a, b, where, note) -> bool:
    if bool(a.requires_grad) != bool(b.requires_grad):
        note("requires_grad", f"{where}: requires_grad {a.requires_grad} vs torch {b.requires_grad}")
    return True


def check_grad_fn(a, b, where, note) -> bool:
    if node_name(a) != node_name(b):
        note("grad_fn", f"{where}: {node_name(a)} vs torch {node_name(b)}")
    return True


def compare_backward(case: Case, pairs, leaves, ref_leaves, lib, ref, note, tol: str = "float64") -> None:
    """Backward from the results that require grad in both, with one seeded upstream gradient."""
    pairs = [
        (a, b)
        for a, b in pairs
        if a.requires_grad and b.requires_grad and b.dtype.is_floating_point and tuple(a.shape) == tuple(b.shape)
    ]
    if not pairs or len(leaves) != len(ref_leaves):
        return
    rng = np.random.default_rng(seed_of(case.cid + "/grad"))
    upstream = [rng.standard_normal(tuple(b.shape)).astype(to_array(b).dtype) for _, b in pairs]
    _, err = call(
        lib.autograd.backward,
        [a for a, _ in pairs],
        [lib.tensor(g, dtype=a.dtype) for (a, _), g in zip(pairs, upstream)],
    )
    _, ref_err = call(ref.autograd.backward, [b for _, b in pairs], [ref.tensor(g) for g in upstream])
    if err is not None or ref_err is not None:
        if err is None:
            note("grad", f"backward: torch raises {short(ref_err)}; trainkit does not")
        elif ref_err is None:
            note("grad", f"backward: trainkit raises {short(err)}; torch does not")
        return
    for i, (x, y) in enumerate(zip(leaves, ref_leaves)):
        gx, gy = x.grad, y.grad
        if (gx is None) != (gy is None):
            note(
                "grad", f"input {i}: grad {'None' if gx is None else 'set'} vs torch {'None' if gy is None else 'set'}"
            )
        elif gx is not None:
            if tuple(gx.shape) != tuple(gy.shape) or dtype_name(gx.dtype) != dtype_name(gy.dtype):
                note(
                    "grad",
                    f"input {i}: grad {dtype_name(gx.dtype)}{tuple(gx.shape)} vs torch "
                    f"{dtype_name(gy.dtype)}{tuple(gy.shape)}",
                )
            elif case.values and not same_values(to_array(gx), to_array(gy), tol):
                note(
                    "grad",
                    f"input {i}: grad {np.array2string(to_array(gx).ravel()[:4], precision=4)} vs torch "
                    f"{np.array2string(to_array(gy).ravel()[:4], precision=4)}",
                )


def finish(case: Case, found: dict) -> Record:
    kinds = [k for k in KINDS if k in found]
    return Record(case.op, case.cid, kinds, found[kinds[0]] if kinds else "")
