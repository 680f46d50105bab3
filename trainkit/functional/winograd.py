"""Winograd convolution F(m x m, 3 x 3) for stride-1 3x3 kernels on the CPU, and the rule that picks it over im2col.

The output is cut into m x m tiles; each needs an (m+2) x (m+2) patch of the padded input. In the transformed
domain a tile's convolution is an elementwise product, and summing over input channels makes it, for each of the
(m+2)^2 positions p, one matrix product::

    V[p] = (B^T d B)[p]        (C, T)     the input patches, T = N * tiles per image
    U[p] = (G w G^T)[p]        (OC, C)    the filters
    M[p] = U[p] @ V[p]         (OC, T)
    y    = A^T M A             the m x m output tiles

which needs (m+2)^2 / (9 m^2) of the multiplications of a direct convolution: 0.25 for m = 4, 0.44 for m = 2.
The backward follows the chain rule through the same steps, so the transformed output gradient dM = A dY A^T is
computed once and serves both gradients: dU = dM @ V^T gives the weight's (through G^T dU G), and dV = U^T @ dM
the input's (through B dV B^T, the overlapping patches adding up).

Every transform is two matrix products with the small 1-D matrix, on arrays laid out with the (m+2)-long axis first
so that each product is one large BLAS call; only the gathers of the patches move data in strides. The batch goes
through all of it a few images at a time (``CHUNK_BYTES``), so that each slice's transformed tiles are used while
they are still in the cache; the transformed input V of each slice is kept for the weight's gradient when the
weight requires grad (4x the input for F(2x2), where im2col keeps 9x). Two threads share the batch
(``parallel.THREADS``), each with a single-threaded BLAS: the transforms are NumPy passes that use one core each,
where a multi-threaded BLAS would only speed up the products.

The rule (``choose``): Winograd for groups 1, 3x3, stride 1, dilation 1, float32/float64 NumPy arrays, when the
layer is large enough that the saved multiplications outweigh the transforms' passes over memory (see
``MIN_COLUMN_BYTES`` and ``MIN_CHANNELS``); im2col for everything else. ``set_algorithm`` or the environment variable
``TRAINKIT_CONV_ALGO=im2col|winograd|auto`` overrides it (``winograd`` still only where it applies).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import NamedTuple

import numpy as np

from ..autograd import workspace
from . import parallel

__all__ = ["choose", "set_algorithm", "ALGORITHMS_RUN"]

ALGORITHMS = ("auto", "im2col", "winograd")
# im2col wins until its column matrix (C*9 rows, N*OH*OW columns) outgrows the caches by far: below about 48 MiB
# of columns Winograd's transforms, passes over memory with little arithmetic, cost more than the products they
# save; above it the column pass itself becomes the bottleneck (64 -> 64 channels on 32 images of 32x32, 75 MB of
# columns: Winograd 0.59x im2col's time; 32 -> 64, 38 MB: 1.30x; W2's 16 -> 32 on 14x14: 1.5x). Below 16 channels
# the transforms never pay. Measured in docs/benchmarks.md.
MIN_COLUMN_BYTES = 48 << 20
MIN_CHANNELS = 16
# the transformed tiles of one slice of the batch, kept this small so that they are used while still cached
CHUNK_BYTES = 4 << 20

# How many convolutions ran with each algorithm in this process: the benchmarks report it.
ALGORITHMS_RUN: Counter = Counter()

_setting: str | None = None


class Transform(NamedTuple):
    """The matrices of F(m x m, 3 x 3): input B^T ((m+2) x (m+2)), filter G ((m+2) x 3), output A^T (m x (m+2))."""

    m: int
    bt: np.ndarray
    g: np.ndarray
    at: np.ndarray


# Interpolation points 0, -1, 1, -2, 2 and infinity (for m = 4), the usual choice: the smallest magnitudes keep
# float32 rounding in the transforms near that of a direct sum.
F4 = Transform(
    4,
    np.array(
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        dtype=np.float64,
    ),
    np.array(
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],
        dtype=np.float64,
    ),
    np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], dtype=np.float64),
)
F2 = Transform(
    2,
    np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
    np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64),
    np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64),
)
# F(2x2) by default: F(4x4) does the products in 0.25 / 0.44 of the multiplications, but its float32 error on a
# 64->128 layer is 2-3 times the suite's tolerance against PyTorch (rtol 1e-4, atol 1e-5 of the values' scale),
# where F(2x2)'s is about PyTorch's own (docs/benchmarks.md). Setting ``TRANSFORM = F4`` trades that accuracy for
# speed.
TRANSFORM = F2


# ------------------------------------------------------------------------------------------------- the rule
def set_algorithm(name: str | None) -> None:
    """Force the convolution algorithm for this process: ``'im2col'``, ``'winograd'`` (where it applies: groups 1,
    3x3, stride 1, dilation 1, NumPy float arrays) or ``'auto'``; ``None`` goes back to ``TRAINKIT_CONV_ALGO``.

    >>> set_algorithm("im2col"); set_algorithm(None)
    """
    if name is not None and name not in ALGORITHMS:
        raise ValueError(f"unknown convolution algorithm {name!r}: use one of {', '.join(ALGORITHMS)} (or None)")
    global _setting
    _setting = name


def _wanted() -> str:
    if _setting is not None:
        return _setting
    name = os.environ.get("TRAINKIT_CONV_ALGO", "auto") or "auto"
    if name not in ALGORITHMS:
        raise ValueError(f"TRAINKIT_CONV_ALGO={name!r} is not an algorithm: set it to one of {', '.join(ALGORITHMS)}")
    return name


def choose(x, w_shape: tuple, geom, groups: int) -> str:
    """``'winograd'`` or ``'im2col'`` for a convolution of the array ``x`` (N, C, H, W) with a (OC, C, KH, KW)
    weight on ``geom`` (an ``im2col.Geometry``).

    Winograd applies to groups 1, a 3x3 kernel, stride 1 and dilation 1 on float32/float64 NumPy arrays; ``auto``
    takes it when C and OC are both at least ``MIN_CHANNELS`` and im2col's column matrix would take at least
    ``MIN_COLUMN_BYTES``. Below that, the transforms' passes over memory cost more than the products they save
    (measured in docs/benchmarks.md, "Convolution algorithms: the cost rule").

    >>> from trainkit.functional.im2col import geometry
    >>> choose(np.zeros((32, 64, 32, 32), np.float32), (64, 64, 3, 3), geometry(32, 32, (3, 3), (1, 1), (1, 1),
    ...        (1, 1, 1, 1)), 1)
    'winograd'
    """
    wanted = _wanted()
    if wanted == "im2col":
        return "im2col"
    applies = (
        groups == 1
        and geom.kernel == (3, 3)
        and geom.stride == (1, 1)
        and geom.dilation == (1, 1)
        and type(x) is np.ndarray
        and x.dtype in (np.float32, np.float64)
        and x.size > 0
    )
    if not applies:
        return "im2col"
    if wanted == "winograd":
        return "winograd"
    n, c = x.shape[:2]
    column_bytes = c * 9 * n * geom.out[0] * geom.out[1] * x.itemsize
    big = min(c, w_shape[0]) >= MIN_CHANNELS and column_bytes >= MIN_COLUMN_BYTES
    return "winograd" if big else "im2col"


# ---------------------------------------------------------------------------------------------- transforms
def _tiles(out: tuple[int, int], m: int) -> tuple[int, int]:
    return -(-out[0] // m), -(-out[1] // m)


def _two_sided(mat: np.ndarray, arr: np.ndarray) -> np.ndarray:
    """``mat @ X @ mat^T`` for every X = arr[:, :, k] of ``arr`` (r, r, K), as (s, s, K): two BLAS products."""
    s, r = mat.shape
    k = arr.shape[2]
    half = (mat @ arr.reshape(r, r * k)).reshape(s, r, k)
    return mat @ half  # broadcast over the first axis: mat @ half[i] for each i


def input_tiles(x: np.ndarray, pads: tuple, out: tuple[int, int], t: Transform) -> np.ndarray:
    """V = B^T d B for every (m+2) x (m+2) patch d of the padded input: ((m+2)^2, C, N * tiles).

    >>> input_tiles(np.ones((2, 3, 6, 6), np.float32), (1, 1, 1, 1), (6, 6), F2).shape  # 3x3 tiles of 2x2
    (16, 3, 18)
    """
    n, c, h, w = x.shape
    m, a = t.m, t.m + 2
    th, tw = _tiles(out, m)
    top, _, left, _ = pads
    # zeros beyond the geometry's own padding only feed output rows and columns that are cropped
    padded = np.zeros((n, c, th * m + 2, tw * m + 2), dtype=x.dtype)
    padded[:, :, top : top + h, left : left + w] = x
    s = padded.strides
    patches = np.lib.stride_tricks.as_strided(
        padded, (a, a, c, n, th, tw), (s[2], s[3], s[1], s[0], s[2] * m, s[3] * m)
    )
    d = np.ascontiguousarray(patches).reshape(a, a, c * n * th * tw)
    return _two_sided(t.bt.astype(x.dtype), d).reshape(a * a, c, n * th * tw)


def filter_tiles(w: np.ndarray, t: Transform) -> np.ndarray:
    """U = G w G^T for every (output, input) channel pair: ((m+2)^2, OC, C).

    >>> filter_tiles(np.ones((4, 3, 3, 3)), F2).shape
    (16, 4, 3)
    """
    oc, c = w.shape[:2]
    a = t.m + 2
    g = t.g.astype(w.dtype)
    u = g @ np.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(3, 3 * oc * c)  # (a, j, OC*C)
    u = g @ u.reshape(a, 3, oc * c)
    return u.reshape(a * a, oc, c)


def output_tiles(mm: np.ndarray, y: np.ndarray, bias, t: Transform) -> None:
    """y = A^T M A tile by tile, written into ``y`` (N, OC, OH, OW) with the bias added.

    >>> y = np.empty((1, 1, 3, 3))
    >>> output_tiles(np.zeros((16, 1, 4)), y, np.array([0.5]), F2); y[0, 0, 0]
    array([0.5, 0.5, 0.5])
    """
    a, m = t.m + 2, t.m
    n, oc, oh, ow = y.shape
    th, tw = _tiles((oh, ow), m)
    tiles = _two_sided(t.at.astype(mm.dtype), mm.reshape(a, a, -1)).reshape(m, m, oc, n, th, tw)
    exact = (th * m, tw * m) == (oh, ow)
    full = y.reshape(n, oc, th, m, tw, m) if exact else np.empty((n, oc, th, m, tw, m), dtype=y.dtype)
    # one pass per position (i, j) in the tile, each over runs of TW elements: a single transposing copy would run
    # NumPy's inner loop over the m-long axis, 2.6x slower for F(2x2)
    for i in range(m):
        for j in range(m):
            part = tiles[i, j].transpose(1, 0, 2, 3)  # (N, OC, TH, TW)
            if bias is not None:
                np.add(part, bias.reshape(oc, 1, 1), out=full[:, :, :, i, :, j])
            else:
                full[:, :, :, i, :, j] = part
    if not exact:
        y[...] = full.reshape(n, oc, th * m, tw * m)[:, :, :oh, :ow]


def grad_output_tiles(g: np.ndarray, t: Transform) -> np.ndarray:
    """dM = A dY A^T for every m x m tile of the output gradient: ((m+2)^2, OC, N * tiles).

    >>> grad_output_tiles(np.ones((2, 4, 5, 5)), F2).shape  # 5 rows make 3 tiles, the last one half empty
    (16, 4, 18)
    """
    n, oc, oh, ow = g.shape
    a, m = t.m + 2, t.m
    th, tw = _tiles((oh, ow), m)
    if (th * m, tw * m) != (oh, ow):
        grown = np.zeros((n, oc, th * m, tw * m), dtype=g.dtype)
        grown[:, :, :oh, :ow] = g
        g = grown
    tiles = np.ascontiguousarray(g.reshape(n, oc, th, m, tw, m).transpose(3, 5, 1, 0, 2, 4))
    return _two_sided(t.at.T.astype(g.dtype), tiles.reshape(m, m, -1)).reshape(a * a, oc, n * th * tw)


def grad_input_from_tiles(dv: np.ndarray, dx: np.ndarray, pads: tuple, out: tuple[int, int], t: Transform) -> None:
    """The input gradient from dV ((m+2)^2, C, N * tiles), written into ``dx`` (N, C, H, W): each patch's
    B dV B^T added back where it was read.

    >>> dx = np.empty((1, 2, 4, 4))
    >>> grad_input_from_tiles(np.zeros((16, 2, 4)), dx, (1, 1, 1, 1), (4, 4), F2); float(abs(dx).max())
    0.0
    """
    n, c, h, w = dx.shape
    m, a = t.m, t.m + 2
    th, tw = _tiles(out, m)
    d = _two_sided(t.bt.T.astype(dv.dtype), dv.reshape(a, a, -1)).reshape(a, a, c, n, th, tw)
    padded = np.empty((c, n, th * m + 2, tw * m + 2), dtype=dv.dtype)
    padded[:, :, th * m :] = 0
    padded[:, :, :, tw * m :] = 0
    # the top-left m x m of every patch covers the grid exactly once: assignments, then the overlaps add (each a
    # strided pass over runs of TW elements)
    for i in range(a):
        for j in range(a):
            if i < m and j < m:
                padded[:, :, i : i + th * m : m, j : j + tw * m : m] = d[i, j]
            else:
                padded[:, :, i : i + th * m : m, j : j + tw * m : m] += d[i, j]
    top, _, left, _ = pads
    dx[...] = padded[:, :, top : top + h, left : left + w].transpose(1, 0, 2, 3)


def grad_filter_from_tiles(du: np.ndarray, t: Transform) -> np.ndarray:
    """The weight gradient G^T dU G from dU ((m+2)^2, OC, C), as (OC, C, 3, 3).

    >>> grad_filter_from_tiles(np.zeros((16, 4, 3)), F2).shape
    (4, 3, 3, 3)
    """
    a = t.m + 2
    oc, c = du.shape[1:]
    gt = t.g.T.astype(du.dtype)
    dw = _two_sided(gt, du.reshape(a, a, oc * c)).reshape(3, 3, oc, c)
    return np.ascontiguousarray(dw.transpose(2, 3, 0, 1))


# ------------------------------------------------------------------------------------------ the convolution
def _chunks(batch: slice, c: int, oc: int, out: tuple[int, int], itemsize: int, t: Transform):
    """Slices of the batch whose transformed tiles (V and M) fit in about ``CHUNK_BYTES`` together: each chunk
    goes through all its steps while its intermediates are still in the cache."""
    th, tw = _tiles(out, t.m)
    per_image = (t.m + 2) ** 2 * (c + oc) * th * tw * itemsize
    step = max(1, CHUNK_BYTES // max(per_image, 1))
    return [slice(i, min(batch.stop, i + step)) for i in range(batch.start, batch.stop, step)]


def forward(x: np.ndarray, w: np.ndarray, b, geom, keep: dict | None = None) -> np.ndarray:
    """The convolution of ``x`` (N, C, H, W) with ``w`` (OC, C, 3, 3) and bias ``b`` on ``geom``.

    ``keep``: a dict that receives each slice's transformed input V, keyed by the slice's (start, stop), for the
    weight's gradient (4x the input for F(2x2): less than the 9x of im2col's columns, which the other algorithm
    keeps; transforming the input again took 8% of W5's time).

    >>> from trainkit.functional.im2col import geometry
    >>> geom = geometry(4, 4, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    >>> forward(np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), None, geom)[0, 0, 0]
    array([4., 6., 6., 4.])
    """
    t = TRANSFORM
    n, c = x.shape[:2]
    oc = w.shape[0]
    y = workspace.empty((n, oc) + tuple(geom.out), x.dtype)
    u = filter_tiles(w, t)

    def work(half):
        for part in _chunks(half, c, oc, geom.out, x.itemsize, t):
            v = input_tiles(x[part], geom.pads, geom.out, t)
            if keep is not None:
                keep[part.start, part.stop] = v
            output_tiles(u @ v, y[part], b, t)

    parallel.split(work, n, single_blas=True)
    return y


def backward(
    g: np.ndarray,
    x,
    w,
    x_shape: tuple,
    geom,
    want_x: bool,
    want_w: bool,
    want_b: bool,
    pooled: bool = True,
    kept: dict | None = None,
):
    """(dx, dw, db) of the convolution from the output gradient ``g``; ``x`` is only read for dw, ``w`` for dx.
    ``pooled``: dx may come from the workspace pool (not for a leaf's gradient, which the leaf keeps). ``kept``:
    the forward's transformed input by slice (see ``forward``); a slice not found there is transformed again.

    >>> from trainkit.functional.im2col import geometry
    >>> geom = geometry(4, 4, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    >>> dx, dw, db = backward(np.ones((1, 1, 4, 4)), np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), (1, 1, 4, 4),
    ...                       geom, True, True, True)
    >>> dx[0, 0, 0], dw[0, 0, 0], db
    (array([4., 6., 6., 4.]), array([ 9., 12.,  9.]), array([16.]))
    """
    t = TRANSFORM
    n, c = x_shape[:2]
    oc = g.shape[1]
    gx = (workspace.empty(x_shape, g.dtype) if pooled else np.empty(x_shape, dtype=g.dtype)) if want_x else None
    u = filter_tiles(w, t).transpose(0, 2, 1) if want_x else None

    def work(half):
        du = None
        for part in _chunks(half, c, oc, geom.out, g.itemsize, t):
            dm = grad_output_tiles(g[part], t)
            if want_w:
                v = kept.get((part.start, part.stop)) if kept is not None else None
                if v is None:  # the slices differ from the forward's (another thread count), or nothing was kept
                    v = input_tiles(x[part], geom.pads, geom.out, t)
                piece = dm @ v.transpose(0, 2, 1)
                du = piece if du is None else np.add(du, piece, out=du)
            if want_x:
                grad_input_from_tiles(u @ dm, gx[part], geom.pads, geom.out, t)
        return du

    gw = None
    if want_x or want_w:
        pieces = parallel.split(work, n, single_blas=True)
        gw = grad_filter_from_tiles(sum(pieces[1:], pieces[0]), t) if want_w else None
    gb = g.sum(axis=(0, 2, 3)) if want_b else None
    return gx, gw, gb
