"""Products over named dimensions: einsum, and outer (the product of two vectors)."""

from __future__ import annotations

import math
import string

import numpy as np

from ..backend import xp_of
from ..function import Op
from ..tensor import Tensor
from . import dual
from .shape import index_into_zeros
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
                tail = (
                    " but an ellipsis (...) was already found"
                    if what == "output"
                    else (" for which an ellipsis was already found")
                )
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


def _parse_einsum(equation: str, operands: tuple) -> tuple[list[str], str, str]:
    """The equation with every ``...`` spelled out in letters of its own, so that the rest only sees letters:
    (input subscripts, output subscripts, the letters standing for the ellipsis dimensions)."""
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
    subs = ["".join(ell[n_ell - e :] if c == "..." else c for c in labels) for labels, e in zip(ins, ell_dims)]
    if arrow:
        out_labels = _scan_subscripts(rhs, len(lhs) + 2, "output")
        out = "".join(ell if c == "..." else c for c in out_labels)
        seen = "".join(subs)
        for i, c in enumerate(out):
            if c not in seen:
                raise RuntimeError(
                    f"einsum(): output subscript {c} does not appear in the equation for any input operand"
                )
            if c in out[:i]:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        letters = "".join(subs)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    _check_sizes(subs, operands, ell)
    return subs, out, ell


def _check_sizes(subs: list, operands, ell: str) -> None:
    """PyTorch's errors for sizes that neither match nor broadcast (a size-1 dimension broadcasts)."""
    sizes: dict = {}
    for k, (sub, t) in enumerate(zip(subs, operands)):
        for pos, (c, size) in enumerate(zip(sub, t._data.shape)):
            first = sub.index(c)
            if first < pos and t._data.shape[first] != size:
                raise RuntimeError(
                    f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                    f"{size} != {t._data.shape[first]}"
                )
            seen = sizes.get(c)
            if seen is not None and size != seen and 1 not in (size, seen):
                if c in ell:
                    raise RuntimeError(
                        f"einsum(): dimension {ell.index(c)} covered by ellipsis in operand {k}has size {size} which "
                        f"does not broadcast with previously seen ellipsis with size {seen} for the respective "
                        "dimension"
                    )
                raise RuntimeError(
                    f"einsum(): subscript {c} has size {size} for operand {k} which does not "
                    f"broadcast with previously seen size {seen}"
                )
            if seen is None or seen == 1:
                sizes[c] = size


class Diagonal(Op, name="DiagonalBackward0"):
    """out = the diagonal of x over dimensions d0 < d1, as a new last dimension.   dx = zeros with g on it."""

    is_view = True

    def forward(self, x, d0, d1):
        self.shape, self.dims = x.shape, (d0, d1)
        xp = xp_of(x)
        view = xp.diagonal(x, 0, d0, d1)
        if xp is np:  # NumPy's diagonal is read-only; the same strides over x give a view that can be written to
            return np.lib.stride_tricks.as_strided(x, view.shape, view.strides, writeable=x.flags.writeable)
        return view

    def backward(self, g):
        d0, d1 = self.dims
        n = g.shape[-1]
        index = [slice(None)] * len(self.shape)
        index[d0] = index[d1] = xp_of(dual.data(g)).arange(n)
        # NumPy puts the indexed dimension where d0 was when d0 and d1 are neighbours, else first
        to = d0 if d1 == d0 + 1 else 0
        order = list(range(g.ndim - 1))
        order.insert(to, g.ndim - 1)
        return index_into_zeros(dual.permute(g, tuple(order)), self.shape, tuple(index), accumulate=False)


def _label_order(subs: list, out: str, ell: str) -> str:
    """PyTorch's order of the aligned dimensions: the output's, then the ellipsis dimensions that are summed, then
    the other summed letters in ASCII order (upper case first)."""
    letters = set("".join(subs))
    summed_ell = [c for c in ell if c not in out and c in letters]
    rest = sorted(c for c in letters if c not in out and c not in ell)
    return out + "".join(summed_ell) + "".join(rest)


def _align(t: Tensor, sub: str, order: str, counts: list) -> Tensor:
    """``t`` with one dimension per letter of ``order``: repeated letters reduced to their diagonal, missing ones
    unsqueezed with size 1. ``counts`` gains one for each letter ``t`` holds with a size other than 1."""
    perm = [-1] * len(order)
    dim = 0
    for c in sub:
        p = order.index(c)
        if perm[p] == -1:
            if t.shape[dim] != 1:
                counts[p] += 1
            perm[p] = dim
            dim += 1
        else:
            prev = perm[p]
            t = Diagonal.apply(t, d0=prev, d1=dim).movedim(-1, prev)
    for p in range(len(order)):
        if perm[p] == -1:
            t = t.unsqueeze(dim)
            perm[p] = dim
            dim += 1
    return t.permute(*perm)


def _sum_product(left: Tensor, right: Tensor, sum_dims: list) -> Tensor:
    """``(left * right)`` summed over ``sum_dims`` (kept with size 1), through one batched matrix product: the
    dimensions both hold, then those only one holds, flattened into the three axes of ``bmm``."""
    if not sum_dims:
        return left * right
    if left.dtype != right.dtype:  # bmm takes one dtype; the message is PyTorch's
        raise RuntimeError(
            f"expected scalar type {scalar_name(left._data.dtype)} but found {scalar_name(right._data.dtype)}"
        )
    both, lo, ro = [], [], []
    sum_size = 1
    for i in range(left.ndim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= left.shape[i]
            elif sl:
                left = left.sum(i, keepdim=True)
            elif sr:
                right = right.sum(i, keepdim=True)
        elif sl and sr:
            both.append(i)
        elif sl:
            lo.append(i)
        else:
            ro.append(i)
    n_both = math.prod(left.shape[d] for d in both)
    n_lo, n_ro = math.prod(left.shape[d] for d in lo), math.prod(right.shape[d] for d in ro)
    out_size = [left.shape[d] for d in both + lo] + [1] * len(sum_dims) + [right.shape[d] for d in ro]
    order = both + lo + sum_dims + ro
    left = left.permute(*order).reshape(n_both, n_lo, sum_size)
    right = right.permute(*(both + sum_dims + ro + lo)).reshape(n_both, sum_size, n_ro)
    inverse = [order.index(i) for i in range(len(order))]
    return left.bmm(right).view(*out_size).permute(*inverse)


def _sublist_equation(args: tuple) -> tuple[str, tuple]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])``, PyTorch's sublist form, as an equation and its operands: 0-25 are
    'A'-'Z', 26-51 are 'a'-'z', and Ellipsis is '...'."""

    def letters(sub) -> str:
        if isinstance(sub, Tensor) or not isinstance(sub, (list, tuple)):
            raise RuntimeError("einsum(): in the sublist form each operand must be followed by a list of subscripts")
        out = ""
        for i in sub:
            if i is Ellipsis:
                out += "..."
            elif not 0 <= int(i) < 52:
                raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")
            else:
                out += chr(ord("A") + i) if i < 26 else chr(ord("a") + i - 26)
        return out

    output = args[-1] if len(args) % 2 else None
    pairs = args[: len(args) - (output is not None)]
    equation = ",".join(letters(sub) for sub in pairs[1::2])
    if output is not None:
        equation += "->" + letters(output)
    return equation, tuple(pairs[0::2])


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
    >>> trainkit.einsum(a, [..., 0, 1], b, [1, 2], [..., 0, 2]).shape
    trainkit.Size([5, 2, 4])
    """
    if not isinstance(equation, str):  # the sublist form
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out, ell = _parse_einsum(equation, operands)
    order = _label_order(subs, out, ell)
    n_out = len(out)
    counts = [0] * len(order)
    ops = [_align(t, sub, order, counts) for sub, t in zip(subs, operands)]
    if len(ops) == 1:
        return ops[0].sum(list(range(n_out, len(order)))) if len(order) > n_out else ops[0]
    # PyTorch's left-to-right contraction: a letter is summed as soon as no operand still to come holds it
    while len(ops) > 1:
        a, b = ops.pop(0), ops.pop(0)
        sum_dims, a_only, b_only = [], [], []
        for d in range(n_out, len(order)):
            if a.shape[d] != 1 and b.shape[d] != 1:
                counts[d] -= 1
                if counts[d] == 1:
                    sum_dims.append(d)
                    counts[d] = 0
            elif counts[d] == 1:
                if a.shape[d] != 1:
                    a_only.append(d)
                    counts[d] = 0
                elif b.shape[d] != 1:
                    b_only.append(d)
                    counts[d] = 0
        if a_only:
            a = a.sum(a_only, keepdim=True)
        if b_only:
            b = b.sum(b_only, keepdim=True)
        ops.insert(0, _sum_product(a, b, sum_dims))
    if len(order) > n_out:  # the summed dimensions are now of size 1
        return ops[0].view(*ops[0].shape[:n_out])
    return ops[0]
