"""Matrix products: matmul (with NumPy's broadcasting and 1-D rules), mm and bmm; singular values (for the nuclear
norm)."""

from __future__ import annotations

import numpy as np

from ..autocast import autocast_inputs, enabled_threads
from ..backend import BFLOAT16_NP, FLOAT32_NP, is_array, kind_of, xp_of
from ..function import Op
from ..tensor import Tensor
from .type_names import scalar_name

__all__ = ["bmm", "dot", "matmul", "mm", "mv", "trace"]


class Matmul(Op, name="UnsafeViewBackward0"):
    """out = x @ y.   dx = g @ y^T,  dy = x^T @ g  (1-D operands are treated as a row / a column)."""

    save_inputs = (0, 1)
    save_only_for = {0: 1, 1: 0}

    def forward(self, x, y):
        self.ndims = (x.ndim, y.ndim)
        try:
            # NumPy has no bfloat16 BLAS: accumulate in float32, round once
            if x.dtype is not FLOAT32_NP and x.dtype == BFLOAT16_NP:
                return (x.astype(np.float32) @ y.astype(np.float32)).astype(x.dtype)
            return x @ y
        except ValueError:
            raise RuntimeError(_shape_error(x.shape, y.shape)) from None

    def backward(self, g):
        x, y = self.saved_tensors
        xnd, ynd = self.ndims
        if xnd == 1:
            x = None if x is None else x.reshape((1, -1))
            g = g.reshape(g.shape[:-1] + (1,) + g.shape[-1:])
        if ynd == 1:
            y = None if y is None else y.reshape((-1, 1))
            g = g.reshape(g.shape + (1,))
        (fx, _), (fy, _) = self.next_functions
        gx = g @ y.swapaxes(-1, -2) if fx is not None else None
        gy = x.swapaxes(-1, -2) @ g if fy is not None else None
        if xnd == 1 and gx is not None:
            gx = gx.reshape(gx.shape[:-2] + gx.shape[-1:])
        if ynd == 1 and gy is not None:
            gy = gy.reshape(gy.shape[:-1])
        return gx, gy


class Mm(Matmul, name="MmBackward0"):
    pass


class Mv(Matmul, name="MvBackward0"):
    pass


class Dot(Matmul, name="DotBackward0"):
    pass


class Bmm(Matmul, name="BmmBackward0"):
    pass


class VecMat(Matmul, name="SqueezeBackward4"):
    pass


class MatmulClone(Matmul, name="CloneBackward0"):
    """A matrix times a batch, where the matrix requires grad: PyTorch folds the batch into one product, whose
    transposed result it copies (hence its node's name)."""


def _shape_error(a: tuple, b: tuple) -> str:
    def fmt(s):
        return "x".join(str(n) for n in s)

    return f"mat1 and mat2 shapes cannot be multiplied ({fmt(a)} and {fmt(b)})"


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with NumPy's rules: 1-D operands, batch dimensions that broadcast.

    >>> import trainkit
    >>> (trainkit.ones(2, 3) @ trainkit.ones(3)).shape
    trainkit.Size([2])
    """
    if enabled_threads:  # only while some thread has autocast on
        input, other = autocast_inputs("matmul", input, other)
    return product(input, other)


def product(a: Tensor, b: Tensor) -> Tensor:
    """``matmul`` without autocast: what ``dot`` and ``mv`` compute (autocast leaves them in the inputs' dtype)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul needs two tensors")
    if a._data.ndim == 0 or b._data.ndim == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {a._data.ndim}D and {b._data.ndim}D"
        )
    return _product(a, b)


def _product(a: Tensor, b: Tensor, cls=None) -> Tensor:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a._data.dtype} != {b._data.dtype}")
    if cls is None:
        cls = {(2, 2): Mm, (2, 1): Mv, (1, 1): Dot, (1, 2): VecMat}.get((a._data.ndim, b._data.ndim), Matmul)
        if cls is Matmul and a.requires_grad and _folds_as_matrix(a._data.shape, b._data.shape):
            cls = MatmulClone
    if a._data.dtype.kind == "b":
        kernel = {Mm: "addmm_impl_cpu_", Mv: "addmv_impl_cpu", VecMat: "addmv_impl_cpu", Dot: "dot"}.get(cls, "bmm")
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    return cls.apply(a, b)


def _folds_as_matrix(a: tuple, b: tuple) -> bool:
    """PyTorch takes ``a`` as one matrix against the batch ``b``: a is 2-D, or a batch of one against a 3-D batch
    of several."""
    if len(b) < 3:
        return False
    return len(a) == 2 or (len(a) == 3 == len(b) and a[0] == 1 and b[0] != 1)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two matrices (2-D only)."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm expects two matrices, got shapes {tuple(input.shape)} and {tuple(mat2.shape)}")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched product of (b, n, m) and (b, m, p) tensors."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise RuntimeError(
            f"bmm expects two 3-D tensors with the same batch size, got shapes {tuple(input.shape)} and "
            f"{tuple(mat2.shape)}"
        )
    if enabled_threads:  # only while some thread has autocast on
        input, mat2 = autocast_inputs("bmm", input, mat2)
    return _product(input, mat2, Bmm)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """Inner product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return product(input, other)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix and a vector: out_i = sum_j input_ij vec_j.

    >>> import trainkit
    >>> mv(trainkit.ones(2, 3), trainkit.ones(3))
    tensor([3., 3.])
    """
    if input.ndim == 0:  # PyTorch reads the size of the result from dimension 0 first
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    n, m = input._data.shape
    if vec._data.shape[0] != m:
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({n}x{m}), vec ({vec._data.shape[0]})")
    return _product(input, vec, Mv)


class Trace(Op, name="TraceBackward0"):
    """out = sum_i x_ii, the sum of the main diagonal of a matrix.   dx = g on the diagonal, 0 elsewhere."""

    def forward(self, x):
        self.shape = x.shape
        # integers sum in int64, as in PyTorch's sum
        return xp_of(x).trace(x, dtype=None if kind_of(x.dtype) == "f" else "int64")

    def backward(self, g):
        n, m = self.shape
        raw = g._data if isinstance(g, Tensor) else g
        diagonal = xp_of(raw).eye(n, m, dtype=bool)
        if isinstance(g, Tensor):
            return g.expand(n, m).where(Tensor._make(diagonal), 0)
        return xp_of(raw).where(diagonal, g, raw.dtype.type(0))


def trace(input: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix (integers and bools give int64; bool is refused as in PyTorch).

    >>> import trainkit
    >>> trace(trainkit.eye(3))
    tensor(3.)
    """
    if input._data.dtype.kind == "b":
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input._data.ndim}")
    if enabled_threads:  # only while some thread has autocast on
        (input,) = autocast_inputs("trace", input)
    return Trace.apply(input)


# ------------------------------------------------------------------------------------------ singular values
def _T(a):
    return a.swapaxes(-1, -2)


def _svd(a):
    """U, S, Vh of the matrices in ``a`` (thin: k = min(m, n) singular values each)."""
    return xp_of(a).linalg.svd(a, full_matrices=False)


def _svd_backward(u, s, vh, gu, gvh):
    """The gradient of A = U diag(S) Vh from gradients of U and Vh (none of S), as PyTorch's ``svd_backward``:

    gA = U [((U^T gU - gU^T U) S + S (Vh gV - gV^T V)) / E] Vh + the parts of gU, gV outside the span of U, V,
    with E_ij = S_j^2 - S_i^2 (1 on the diagonal). Arrays only."""
    m, n = u.shape[-2], vh.shape[-1]
    v, gv = _T(vh), _T(gvh)
    uhgu = _T(u) @ gu
    uhgu = uhgu - _T(uhgu)
    vhgv = vh @ gv
    vhgv = vhgv - _T(vhgv)
    s2 = s * s
    e = s2[..., None, :] - s2[..., :, None]
    diag = xp_of(s).arange(s.shape[-1])
    e[..., diag, diag] = 1
    ga = (uhgu * s[..., None, :] + s[..., :, None] * vhgv) / e
    if m > n:
        ga = u @ ga
        gu_sinv = gu / s[..., None, :]
        ga = (ga + gu_sinv - u @ (_T(u) @ gu_sinv)) @ vh
    elif m < n:
        ga = ga @ vh
        gv_sinv = gv / s[..., None, :]
        ga = u @ (ga + _T(gv_sinv) - (_T(gv_sinv) @ v) @ vh)
    else:
        ga = u @ (ga @ vh)
    return ga


class SvdvalsGrad(Op, name="LinalgSvdBackward0Backward0"):
    """out = U diag(g) Vh with U, Vh from the SVD of A: the gradient of the singular values, differentiable once
    more (for ``create_graph``).   dA = svd_backward with gU = G V diag(g), gVh = diag(g) U^T G,   dg = diag(U^T G V).
    """

    def forward(self, a, g):
        u, s, vh = _svd(a)
        self.u, self.s, self.vh, self.g = u, s, vh, g
        return (u * g[..., None, :]) @ vh

    def backward(self, gg):
        if not is_array(gg):
            raise NotImplementedError("norm(p='nuc'): derivatives of third order are not supported")
        u, s, vh, g = self.u, self.s, self.vh, self.g
        gu = (gg @ _T(vh)) * g[..., None, :]
        gvh = g[..., :, None] * (_T(u) @ gg)
        da = _svd_backward(u, s, vh, gu, gvh) if self.next_functions[0][0] is not None else None
        dg = ((_T(u) @ gg) * vh).sum(axis=-1) if self.next_functions[1][0] is not None else None
        return da, dg


class Svdvals(Op, name="LinalgSvdBackward0"):
    """out = the singular values S of the matrices in x (x = U diag(S) Vh).   dx = U diag(g) Vh."""

    save_inputs = (0,)

    def forward(self, x):
        u, s, vh = _svd(x)
        self.u, self.vh = u, vh
        return s

    def backward(self, g):
        if is_array(g):
            return (self.u * g[..., None, :]) @ self.vh
        (x,) = self.saved_tensors
        return SvdvalsGrad.apply(x, g)


def svdvals(A: Tensor) -> Tensor:
    """The singular values of the matrices in ``A`` (its last two dimensions), largest first, as
    ``torch.linalg.svdvals``.

    >>> import trainkit
    >>> svdvals(trainkit.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor([4., 3.])
    """
    if A._data.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    if kind_of(A._data.dtype) != "f":
        raise RuntimeError("linalg.svd: Expected a floating point or complex tensor as input. Got " + scalar_name(A))
    return Svdvals.apply(A)
