"""Products over named dimensions: einsum, and outer (the product of two vectors)."""

from __future__ import annotations

import string

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .math import promote
from .type_names import scalar_name

__all__ = ["einsum", "outer"]


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two vectors: ``out[i, j] = input[i] * vec2[j]``."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v._data.ndim}-D")
    return input.reshape(-1, 1) * vec2


def _scan_subscripts(part: str, offset: int, what: str) -> list:
    """The labels of one side of an einsum equation (``'...'`` kept as one item), with PyTorch's errors."""
    labels: list = []
    found = False
    i = 0
    while i < len(part):
        c = part[i]
        if c == ".":
            if found:
                tail = " but an ellipsis (...) was already found" if what == "output" else (
                    " for which an ellipsis was already found")
                raise RuntimeError(f"einsum(): found '.' for {what}{tail}")
            if not (i + 2 < len(part) and part[i + 1] == "." and part[i + 2] == "."):
                tail = " (...)" if what == "output" else ""
                raise RuntimeError(f"einsum(): found '.' for {what} that is not part of any ellipsis{tail}")
            labels.append("...")
            found = True
            i += 2
        elif c in string.ascii_letters:
            labels.append(c)
        elif c != " ":
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {offset + i} in the equation string, subscripts must "
                "be in [a-zA-Z]"
            )
        i += 1
    return labels


def _parse_einsum(equation: str, operands: tuple) -> tuple[list[str], str, list]:
    """The equation with every ``...`` spelled out in letters of its own, so that the op and its backward only see
    letters: (input subscripts, output subscripts, operands expanded where a size-1 dimension broadcasts)."""
    lhs, arrow, rhs = equation.partition("->")
    parts = lhs.split(",")
    n = len(operands)
    if len(parts) != n:
        raise RuntimeError(
            "einsum(): more operands were provided than specified in the equation"
            if n > len(parts)
            else "einsum(): fewer operands were provided than specified in the equation"
        )
    ins, ell_dims, offset = [], [], 0
    for k, (part, t) in enumerate(zip(parts, operands)):
        labels = _scan_subscripts(part, offset, f"operand {k}")
        offset += len(part) + 1
        nd = t._data.ndim
        named = len(labels) - ("..." in labels)
        if "..." in labels:
            if named > nd:
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({named}) is more than the number of "
                    f"dimensions ({nd}) for operand {k}"
                )
            ell_dims.append(nd - named)
        else:
            if named != nd:
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({named}) does not match the number of "
                    f"dimensions ({nd}) for operand {k} and no ellipsis was given"
                )
            ell_dims.append(0)
        ins.append(labels)
    n_ell = max(ell_dims, default=0)
    unused = [c for c in string.ascii_letters if c not in equation]
    if n_ell > len(unused):
        raise RuntimeError("einsum(): the ellipsis covers more dimensions than there are unused letters")
    ell = "".join(unused[:n_ell])
    subs = ["".join(ell[n_ell - e:] if c == "..." else c for c in labels) for labels, e in zip(ins, ell_dims)]
    if arrow:
        out_labels = _scan_subscripts(rhs, len(lhs) + 2, "output")
        out = "".join(ell if c == "..." else c for c in out_labels)
        seen = "".join(subs)
        for i, c in enumerate(out):
            if c not in seen:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   "operand")
            if c in out[:i]:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        letters = "".join(subs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return subs, out, _broadcast_operands(subs, list(operands), ell)


def _broadcast_operands(subs: list, operands: list, ell: str) -> list:
    """Operands whose size-1 dimensions meet a larger size of the same letter elsewhere, expanded to it."""
    sizes: dict = {}
    for k, (sub, t) in enumerate(zip(subs, operands)):
        for pos, (c, size) in enumerate(zip(sub, t._data.shape)):
            first = sub.index(c)
            if first < pos and t._data.shape[first] != size:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                                   f"{size} != {t._data.shape[first]}")
            seen = sizes.get(c)
            if seen is not None and size != seen and 1 not in (size, seen):
                if c in ell:
                    raise RuntimeError(
                        f"einsum(): dimension {ell.index(c)} covered by ellipsis in operand {k}has size {size} which "
                        f"does not broadcast with previously seen ellipsis with size {seen} for the respective "
                        "dimension"
                    )
                raise RuntimeError(f"einsum(): subscript {c} has size {size} for operand {k} which does not "
                                   f"broadcast with previously seen size {seen}")
            if seen is None or seen == 1:
                sizes[c] = size
    for k, (sub, t) in enumerate(zip(subs, operands)):
        target = tuple(sizes[c] for c in sub)
        if target != t._data.shape:
            operands[k] = t.expand(*target)
    return operands


def _einsum(eq: str, operands: list):
    """numpy/cupy einsum, or the differentiable op when an operand is a Tensor (constants wrapped)."""
    if any(isinstance(o, Tensor) for o in operands):
        return Einsum.apply(*[o if isinstance(o, Tensor) else Tensor._make(o) for o in operands], equation=eq)
    xp = xp_of(operands[0])
    return xp.einsum(eq, *operands, optimize=len(operands) > 2)


class Einsum(Op, name="EinsumBackward0"):
    """out = einsum(equation, *xs).

    dx_k = einsum of g (output subscripts) with the other operands into x_k's subscripts; a letter only x_k has
    is broadcast with a vector of ones, and a letter repeated in x_k is put on a diagonal with an identity.
    """

    save_inputs = tuple(range(32))

    def forward(self, *xs, equation):
        self.equation = equation
        self.shapes = [x.shape for x in xs]
        xp = xp_of(xs[0])
        return xp.asarray(xp.einsum(equation, *xs, optimize=len(xs) > 2))

    @classmethod
    def apply(cls, *inputs, equation):
        klass = _einsum_class(len(inputs))
        return Op.apply.__func__(klass, *inputs, equation=equation)

    def backward(self, g):
        xs = self.saved_tensors
        ins, out = self.equation.split("->")
        ins = ins.split(",")
        sizes = {}
        for sub, shape in zip(ins, self.shapes):
            sizes.update(zip(sub, shape))
        free = iter(c for c in string.ascii_letters if c not in sizes)
        grads = []
        for k, sub in enumerate(ins):
            if self.next_functions[k][0] is None:
                grads.append(None)
                continue
            xd = dual.data(xs[k])
            xp = xp_of(xd)
            subs, ops = [out], [g]
            for j, s in enumerate(ins):
                if j != k:
                    subs.append(s)
                    ops.append(xs[j])
            have = set("".join(subs))
            target = ""
            for c in sub:
                if c in target:
                    new = next(free)
                    subs.append(c + new)
                    ops.append(xp.eye(sizes[c], dtype=xd.dtype))
                    target += new
                else:
                    if c not in have:
                        subs.append(c)
                        ops.append(xp.ones(sizes[c], dtype=xd.dtype))
                        have.add(c)
                    target += c
            grads.append(_einsum(",".join(subs) + "->" + target, ops))
        return tuple(grads)


_EINSUM_CLASSES: dict = {}


def _einsum_class(n: int):
    """Einsum with ``save_inputs`` set to its ``n`` operands."""
    if n not in _EINSUM_CLASSES:
        _EINSUM_CLASSES[n] = type("EinsumBackward0", (Einsum,), {"save_inputs": tuple(range(n))})
    return _EINSUM_CLASSES[n]


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation: ``einsum('ij,jk->ik', a, b)`` is ``a @ b``. Without '->' the output holds the
    dimensions under ``...`` and then the letters that appear once, in alphabetical order. ``...`` stands for the
    dimensions not named by letters; they broadcast across operands, as do any size-1 dimensions.

    >>> import trainkit
    >>> a, b = trainkit.ones(5, 2, 3), trainkit.ones(3, 4)
    >>> trainkit.einsum('...ij,jk->...ik', a, b).shape
    trainkit.Size([5, 2, 4])
    >>> trainkit.einsum('bij->ji', a).shape
    trainkit.Size([3, 2])
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out, operands = _parse_einsum(equation, operands)
    dtype = operands[0]._data.dtype
    if any(t._data.dtype != dtype for t in operands):
        summed = {c for c in set("".join(ins)) if c not in out and sum(c in part for part in ins) > 1}
        if summed:  # PyTorch contracts through bmm, which takes one dtype; products without a sum promote
            other = next(t for t in operands if t._data.dtype != dtype)
            raise RuntimeError(f"expected scalar type {scalar_name(dtype)} but found {scalar_name(other)}")
        ops = list(operands)
        for i in range(1, len(ops)):
            ops[0], ops[i] = promote(ops[0], ops[i])
        operands = tuple(o if o._data.dtype == ops[0]._data.dtype else promote(ops[0], o)[1] for o in ops)
    return Einsum.apply(*operands, equation=",".join(ins) + "->" + out)
