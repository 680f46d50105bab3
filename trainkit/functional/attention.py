"""Scaled dot-product attention as one op, ``F.scaled_dot_product_attention`` (multi-head attention, built on it,
is in ``multi_head_attention.py``).

With S = q k^T * scale + mask (a float mask added; a boolean one, True = take part, adds 0 or -inf; ``is_causal``
the top-left lower triangle of (L, S)), P = softmax(S) along the keys and O = dropout(P) v. Backward, with
D = rowsum(dO * O) = rowsum(dP * P):  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = dS K * scale,
dK = dS^T Q * scale, and the float mask gets dS. A row whose keys are all masked gives zeros (PyTorch's safe
softmax), not nan. The node keeps P (after the softmax) for backward; with ``create_graph`` the backward recomputes
attention from the saved inputs with ordinary differentiable ops, so second derivatives come out right.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import api, grad_mode, workspace
from ..autograd.autocast import autocast_inputs, enabled_threads
from ..autograd.backend import BFLOAT16_NP, bfloat16, kind_of, xp_of
from ..autograd.function import Op
from ..autograd.ops.random_fill import bernoulli_keep
from ..autograd.ops.type_names import scalar_name
from ..autograd.tensor import Tensor
from .activation import softmax
from .parallel import MIN_BYTES, split

__all__ = ["scaled_dot_product_attention"]

_NO_COUNTER = [0]  # the version counter of P, an array of the node's own: nothing can change it in place
_causal_cache: dict = {}


def causal_bias_t(L: int, S: int, dtype, xp):
    """The additive mask of ``is_causal``, transposed to (S, L): key j may not be seen by query i < j (-inf), the
    rest adds 0. One read-only array per (L, S, dtype), made once."""
    key = (L, S, np.dtype(dtype).str, xp.__name__)
    bias = _causal_cache.get(key)
    if bias is None:
        if len(_causal_cache) > 64:
            _causal_cache.clear()
        bias = xp.tril(xp.full((S, L), -xp.inf, dtype=dtype), -1)
        if xp is np:
            bias.flags.writeable = False
        _causal_cache[key] = bias
    return bias


def _additive(mask, dtype, xp):
    """A boolean mask (True = take part) as 0 / -inf in ``dtype``; a float mask as it is."""
    if mask.dtype == np.bool_:
        return xp.where(mask, xp.zeros((), dtype), xp.asarray(-xp.inf, dtype=dtype))
    return mask


def _swap(a):
    return a.swapaxes(-1, -2)


def _broadcast(a: tuple, b: tuple) -> tuple:
    # equal shapes, the common case, without NumPy's general (and slower) rule
    return a if a == b else np.broadcast_shapes(a, b)


def _run_parts(part, n: int, nbytes: int, xp) -> list:
    """``part(slice)`` over the first batch dimension: on both cores for NumPy arrays of some size (each thread
    with a single-threaded BLAS, so that its products and its passes over memory run side by side)."""
    if xp is np and n > 1 and nbytes >= MIN_BYTES:
        return split(part, n, single_blas=True)
    return [part(slice(0, n))]


def _dropout_keep(shape: tuple, p: float, like):
    """The dropout mask, kept weights scaled by 1 / (1 - p), drawn from the default generator of ``like``'s
    device. The scores are held transposed here, (..., S, L), so the mask is drawn as torch draws it over
    (..., L, S) and transposed: the same positions are dropped for the same seed."""
    xp = xp_of(like)
    if p >= 1.0:
        return xp.zeros(shape, dtype=like.dtype)
    keep = bernoulli_keep(shape[:-2] + (shape[-1], shape[-2]), 1 - p, like)
    return xp.ascontiguousarray(xp.swapaxes(xp.asarray(keep), -1, -2))


def _repeat_heads(a, groups: int, xp):
    """Key or value heads repeated for grouped-query attention: head h of the query reads head h // groups."""
    return a if groups == 1 else xp.repeat(a, groups, axis=-3)


def _sum_heads(g, groups: int):
    """The gradient of repeated heads summed back onto each head."""
    if g is None or groups == 1:
        return g
    shape = g.shape
    return g.reshape(shape[:-3] + (shape[-3] // groups, groups) + shape[-2:]).sum(axis=-3)


# Scores no larger than this in magnitude need no shift before exp: exp stays within (1e-26, 1e26), so neither
# overflows nor underflows to 0 in float32 and sums of up to 1e12 keys stay finite.
_NO_SHIFT_BOUND = 60.0


def _small_scores(q, k, scale: float, xp) -> bool:
    """Is |score| <= scale * max |q_i| * max |k_j| within ``_NO_SHIFT_BOUND``? (Cauchy-Schwarz: two passes over q
    and k, cheaper than the max over the scores that it spares.)"""
    qq = xp.einsum("...i,...i->...", q, q).max() if q.size else 0.0
    kk = xp.einsum("...i,...i->...", k, k).max() if k.size else 0.0
    return bool(abs(scale) * math.sqrt(float(qq) * float(kk)) <= _NO_SHIFT_BOUND)


def _softmax_columns(st, xp, small: bool):
    """softmax over axis -2 of the (..., S, L) scores, in place; returns the (..., 1, L) flags of the queries that
    see no key (left as zeros, as PyTorch's safe softmax gives), or None. Masked scores are -inf. With ``small``
    scores (see ``_small_scores``) the row maximum is not subtracted first: softmax does not change under a
    shift, and exp cannot overflow there."""
    S = st.shape[-2]
    if not small:
        m = st.max(axis=-2, keepdims=True)
        bad = ~xp.isfinite(m)
        if bad.any():
            m[bad] = 0
        else:
            bad = None
        st -= m
    xp.exp(st, out=st)
    z = xp.matmul(xp.ones((1, S), dtype=st.dtype), st)  # the column sums, as one product
    if small:
        bad = z == 0  # only where every key was masked: the others add at least exp(-bound) > 0
        bad = bad if bad.any() else None
    if bad is None:
        xp.reciprocal(z, out=z)
    else:
        with np.errstate(divide="ignore"):
            xp.reciprocal(z, out=z)
        z[bad] = 0
    st *= z
    return bad


class ScaledDotProductAttention(Op, name="ScaledDotProductFlashAttentionForCpuBackward0"):
    """O = dropout(softmax(q k^T * scale + mask)) v over the last two dimensions, batched over the rest.

    Inputs: q (..., L, E), k (..., S, E), v (..., S, Ev), mask (broadcast to (..., L, S)) or None.
    dV = Pd^T dO,  dS = P * ((dO V^T) * keep - rowsum(dO * O)),  dQ = dS K * scale,  dK = dS^T Q * scale,
    dmask = dS, where Pd = P * keep and keep is the dropout mask scaled by 1 / (1 - p) (1 without dropout).
    """

    save_inputs = (0, 1, 2, 3)
    save_output = True

    def forward(self, q, k, v, mask, scale, dropout_p, is_causal, k_groups, v_groups):
        # The scores are held transposed, (..., S, L): NumPy reduces over the second-to-last axis (rows added
        # element-wise) several times faster than over the last, and BLAS reads either layout.
        xp = xp_of(q)
        self.scale, self.groups, self.causal = scale, (k_groups, v_groups), is_causal
        L, S = q.shape[-2], k.shape[-2]
        k, v = _repeat_heads(k, k_groups, xp), _repeat_heads(v, v_groups, xp)
        bias = None if mask is None else _swap(_additive(mask, q.dtype, xp))
        full = _broadcast(_broadcast(q.shape[:-2], k.shape[:-2]), v.shape[:-2])
        if bias is not None:  # a mask with more batch dimensions than q and k: the scores grow to its shape
            full = _broadcast(full, bias.shape[:-2])
        # every operand viewed at the whole batch shape (one dimension at least): a share of its first dimension
        # is then a share of the work
        batch = full or (1,)
        qb, kb, vb = (xp.broadcast_to(x, batch + x.shape[-2:]) for x in (q, k, v))
        bias = None if bias is None else xp.broadcast_to(bias, batch + (S, L))
        st = workspace.empty(batch + (S, L), q.dtype, xp)
        out = workspace.empty(batch + (L, v.shape[-1]), q.dtype, xp)
        causal = causal_bias_t(L, S, q.dtype, xp) if is_causal else None
        small = S > 0 and (mask is None or mask.dtype == np.bool_) and _small_scores(q, k, scale, xp)
        keep = _dropout_keep(st.shape, dropout_p, q) if dropout_p > 0.0 else None

        def part(p):
            qp = qb[p]
            # q^T * scale made contiguous in one pass: BLAS multiplies small matrices faster by a contiguous right
            # factor than by a transposed view, and q is smaller than the scores
            qt = xp.empty(qp.shape[:-2] + (qp.shape[-1], L), qp.dtype)
            xp.multiply(_swap(qp), scale, out=qt)
            sp = st[p]
            xp.matmul(kb[p], qt, out=sp)
            if bias is not None:
                sp += bias[p]
            if causal is not None:
                sp += causal
            bad = _softmax_columns(sp, xp, small) if S else None
            xp.matmul(_swap(sp if keep is None else sp * keep[p]), vb[p], out=out[p])
            return p, bad

        flags = [f for f in _run_parts(part, batch[0], st.nbytes, xp) if f[1] is not None]
        bad = None
        if flags:
            bad = xp.zeros(batch + (1, L), dtype=bool)
            for p, b in flags:
                bad[p] = b
            bad = bad.reshape(full + (1, L))
        self.extra = (st.reshape(full + (S, L)), None if keep is None else keep.reshape(full + (S, L)), bad)
        return out.reshape(full + out.shape[-2:])

    def backward(self, g):
        q, k, v, mask, o, _ = self.saved_tensors
        if isinstance(g, Tensor):
            return self._recompute_backward(g, q, k, v, mask)
        pt, keep, _ = self.extra
        xp = xp_of(g)
        kg, vg = self.groups
        k, v = _repeat_heads(k, kg, xp), _repeat_heads(v, vg, xp)
        (fq, _), (fk, _), (fv, _), (fm, _) = self.next_functions
        full = pt.shape[:-2]
        batch = full or (1,)
        S, L = pt.shape[-2:]
        pt, gb, ob = pt.reshape(batch + (S, L)), g.reshape(batch + g.shape[-2:]), o.reshape(batch + o.shape[-2:])
        keep = None if keep is None else keep.reshape(batch + (S, L))
        qb, kb, vb = (xp.broadcast_to(x, batch + x.shape[-2:]) for x in (q, k, v))
        dq, dk, dv, dm = (
            None if f is None else workspace.empty(batch + shape, q.dtype, xp)
            for f, shape in ((fq, q.shape[-2:]), (fk, k.shape[-2:]), (fv, v.shape[-2:]), (fm, (S, L)))
        )
        scale = self.scale

        def part(p):
            ptp, gp = pt[p], gb[p]
            if dv is not None:
                xp.matmul(ptp if keep is None else ptp * keep[p], gp, out=dv[p])
            if dq is None and dk is None and dm is None:
                return
            gt = xp.empty(gp.shape[:-2] + (gp.shape[-1], L), gp.dtype)
            gt[...] = _swap(gp)
            dst = xp.matmul(vb[p], gt) if dm is None else xp.matmul(vb[p], gt, out=dm[p])  # dP, transposed as P
            if keep is not None:
                dst *= keep[p]
            dst -= xp.einsum("...ij,...ij->...i", gp, ob[p])[..., None, :]  # rowsum(dO * O) = rowsum(dP * P)
            dst *= ptp
            for grad, other in ((dq, kb), (dk, qb)):
                if grad is not None:
                    gpart = grad[p]
                    xp.matmul(_swap(dst) if grad is dq else dst, other[p], out=gpart)
                    gpart *= scale

        _run_parts(part, batch[0], pt.nbytes, xp)
        dq, dk, dv, dm = (None if a is None else a.reshape(full + a.shape[-2:]) for a in (dq, dk, dv, dm))
        return dq, _sum_heads(dk, kg), _sum_heads(dv, vg), None if dm is None else _swap(dm)

    def _recompute_backward(self, g, q, k, v, mask):
        """The backward of a ``create_graph`` pass: attention recomputed with differentiable ops from the saved
        inputs, and differentiated through, so that the gradients are functions of the inputs themselves."""
        keep = self.extra[1]
        keep = None if keep is None else _swap(keep)
        kg, vg = self.groups
        wanted = [(i, x) for i, (x, (fn, _)) in enumerate(zip((q, k, v, mask), self.next_functions)) if fn is not None]
        with grad_mode.enable_grad():
            out = _attention_with_ops(q, k, v, mask, self.scale, keep, kg, vg, self.causal)
            grads = api.grad(out, [x for _, x in wanted], g, create_graph=True, allow_unused=True)
        result = [None] * 4
        for (i, x), gi in zip(wanted, grads):
            result[i] = gi if gi is not None else x * 0
        return tuple(result)


def _attention_with_ops(q, k, v, mask, scale, keep, k_groups, v_groups, causal):
    """softmax(q k^T * scale + mask) v written with differentiable Tensor ops (see ``_recompute_backward``); a
    query whose scores are all -inf (it sees no key) gets zeros, as PyTorch's safe softmax gives."""
    xp = xp_of(q._data)
    if k_groups > 1:
        k = k[..., np.repeat(np.arange(k.shape[-3]), k_groups), :, :]
    if v_groups > 1:
        v = v[..., np.repeat(np.arange(v.shape[-3]), v_groups), :, :]
    # PyTorch's reference path scales q and k by sqrt(scale) each: an empty head size then gives zero scores
    # where zeros * scale would give nan for its infinite default scale
    root = math.sqrt(abs(scale))
    s = (q * (root if scale >= 0 else -root)) @ (k.transpose(-2, -1) * root)
    if mask is not None:
        s = s + (Tensor._make(_additive(mask._data, s._data.dtype, xp)) if mask._data.dtype == np.bool_ else mask)
    if causal:
        s = s + Tensor._make(_swap(causal_bias_t(q.shape[-2], k.shape[-2], s._data.dtype, xp)))
    bad = xp.isneginf(s._data).all(axis=-1, keepdims=True)
    bad = bad if bool(bad.any()) else None
    if bad is not None:  # fully masked rows: zeros, their -inf scores kept out of the softmax
        s = s.masked_fill(Tensor._make(xp.broadcast_to(bad, s.shape)), 0.0)
    p = softmax(s, -1)
    if bad is not None:
        p = p.masked_fill(Tensor._make(xp.broadcast_to(bad, p.shape)), 0.0)
    if keep is not None:
        p = p * Tensor._make(keep)
    return p @ v


def _check(
    query: Tensor, key: Tensor, value: Tensor, attn_mask, dropout_p: float, is_causal: bool, enable_gqa: bool
) -> tuple:
    """PyTorch's checks of the arguments; returns how many query heads share each key and each value head."""
    if not all(isinstance(x, Tensor) for x in (query, key, value)):
        raise TypeError("scaled_dot_product_attention(): query, key and value must be Tensors")
    qd, kd, vd = query._data.dtype, key._data.dtype, value._data.dtype
    if not (qd == kd == vd):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{scalar_name(qd)} key.dtype: {scalar_name(kd)} and value.dtype: {scalar_name(vd)} instead."
        )
    if kind_of(qd) != "f":
        raise RuntimeError(f"expected scalar type Float but found {scalar_name(qd)}")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead."
        )
    if query.device != key.device or query.device != value.device:
        raise RuntimeError(
            "Expected query, key, and value to have the same device type, but got query.device: "
            f"{query.device} key.device: {key.device} and value.device: {value.device} instead."
        )
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if attn_mask is not None:
        if is_causal and not _fused_path(query, key, value, attn_mask, dropout_p, enable_gqa):
            raise RuntimeError(
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
            )
        md = attn_mask._data.dtype
        if md != np.bool_ and md != qd:
            raise RuntimeError(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
                f"{scalar_name(md)} and  query.dtype: {scalar_name(qd)} instead."
            )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"Expected query (L, E), key (S, E) and value (S, Ev) in their last two dimensions, but "
            f"got {list(query.shape)}, {list(key.shape)} and {list(value.shape)}"
        )
    k_groups = v_groups = 1
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and value.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(
                "Number of heads in key and value must divide the number of heads in query, but got "
                f"query heads {hq}, key heads {hk} and value heads {hv}"
            )
        k_groups, v_groups = hq // hk, hq // hv
    lead = -3 if k_groups > 1 or v_groups > 1 else -2  # grouped heads are matched above, not broadcast
    batch = [tuple(x.shape[:lead]) for x in (query, key, value)]
    _check_broadcast(batch)
    if attn_mask is not None:
        scores = _broadcast(_broadcast(*batch[:2]), batch[2]) + query.shape[lead:-2] + (query.shape[-2], key.shape[-2])
        _check_broadcast([scores, tuple(attn_mask.shape)])
        if attn_mask.ndim > len(scores):  # the mask is added to the scores in place: it may not add dimensions
            wide = list(_broadcast(scores, tuple(attn_mask.shape)))
            raise RuntimeError(f"output with shape {list(scores)} doesn't match the broadcast shape {wide}")
    return k_groups, v_groups


def _fused_path(query, key, value, attn_mask, dropout_p: float, enable_gqa: bool) -> bool:
    """Where PyTorch's CPU takes its fused (flash) kernel, which applies ``attn_mask`` and ``is_causal`` together;
    elsewhere its reference path refuses the pair. 4-D inputs of one batch size, heads equal (or grouped), one head
    size for keys and values, no dropout, more than one query, and a 2-D or 4-D mask."""
    heads = enable_gqa or query.shape[1] == key.shape[1] == value.shape[1] if query.ndim == 4 else False
    return (
        query.ndim == key.ndim == value.ndim == 4
        and attn_mask.ndim in (2, 4)
        and heads
        and dropout_p == 0.0
        and query.shape[0] == key.shape[0] == value.shape[0]
        and query.shape[-1] == value.shape[-1]
        and query.shape[-2] > 1
    )


def _out_shape(query, key, value, k_groups: int, v_groups: int) -> tuple:
    lead = -3 if k_groups > 1 or v_groups > 1 else -2
    batch = _broadcast(_broadcast(query.shape[:lead], key.shape[:lead]), value.shape[:lead])
    return batch + query.shape[lead:-1] + value.shape[-1:]


def _no_work(query, key, value, k_groups: int, v_groups: int) -> bool:
    """An empty result or no key to attend to: PyTorch returns zeros without computing any score."""
    return key.shape[-2] == 0 or 0 in _out_shape(query, key, value, k_groups, v_groups)


def _empty_attention(query, key, value, k_groups: int, v_groups: int) -> Tensor:
    """Zeros of the result's shape, tied to the inputs by ``(sum q + sum k + sum v) * 0`` so that each input
    still gets a (zero) gradient, PyTorch's graph for this case."""
    zeros = Tensor._make(xp_of(query._data).zeros(_out_shape(query, key, value, k_groups, v_groups), query._data.dtype))
    return zeros + (query.sum() + key.sum() + value.sum()) * 0


def _flash_path(query, key, value, attn_mask, dropout_p: float, k_groups: int, v_groups: int) -> bool:
    """Where PyTorch's CPU runs its fused kernel (one ``ScaledDotProductFlashAttentionForCpuBackward0`` node): 4-D
    inputs of one batch size, equal (or grouped) heads, one nonzero head size for queries, keys and values, no
    dropout, and no mask or a 2-D or 4-D mask that needs no gradient. Elsewhere its reference path composes the
    ops, and so does this module, so that the graph has PyTorch's nodes."""
    if not query.ndim == key.ndim == value.ndim == 4:
        return False
    grouped = k_groups > 1 or v_groups > 1
    return (
        query.shape[0] == key.shape[0] == value.shape[0]
        and (grouped or query.shape[1] == key.shape[1] == value.shape[1])
        and query.shape[-1] == value.shape[-1] > 0
        and dropout_p == 0.0
        and (attn_mask is None or (attn_mask.ndim in (2, 4) and not attn_mask.requires_grad))
    )


def _math_attention(query, key, value, attn_mask, scale, dropout_p, is_causal, k_groups, v_groups) -> Tensor:
    """softmax(q k^T * scale + mask) v composed of Tensor ops, as PyTorch's reference path does: fully masked
    queries get zeros (its safe softmax), the dropout mask is drawn over (..., L, S) as it draws it."""
    L, S = query.shape[-2], key.shape[-2]
    batch = _out_shape(query, key, value, k_groups, v_groups)[:-2]
    if attn_mask is not None:
        batch = _broadcast(batch, attn_mask.shape[:-2])
    keep = None if dropout_p == 0.0 else _swap(_dropout_keep(batch + (S, L), dropout_p, query._data))
    return _attention_with_ops(query, key, value, attn_mask, scale, keep, k_groups, v_groups, is_causal)


def _check_broadcast(shapes: list) -> None:
    """PyTorch's message for shapes that do not broadcast, naming the first dimension that fails."""
    a = shapes[0]
    for b in shapes[1:]:
        n = max(len(a), len(b))
        for i in range(1, n + 1) if a != b else ():
            sa, sb = (a[-i] if i <= len(a) else 1), (b[-i] if i <= len(b) else 1)
            if sa != sb and sa != 1 and sb != 1:
                raise RuntimeError(
                    f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                    f"non-singleton dimension {n - i}"
                )
        a = _broadcast(a, b)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(query key^T * scale + mask) value over the last two dimensions, batched (and broadcast) over the
    leading ones: query (..., L, E), key (..., S, E), value (..., S, Ev) give (..., L, Ev).

    ``attn_mask``: boolean (True = the key takes part) or float (added to the scores), broadcast to (..., L, S).
    ``is_causal``: query i sees keys 0..i (the top-left lower triangle); together with ``attn_mask`` only where
    PyTorch's CPU kernel accepts both (4-D inputs, Ev = E, no dropout: both apply), refused elsewhere as PyTorch does.
    ``scale`` defaults to 1 / sqrt(E). ``dropout_p`` drops attention weights (always, as PyTorch's functional
    does: pass 0.0 in evaluation). ``enable_gqa``: key and value heads (dimension -3) are shared by groups of
    query heads. The graph is PyTorch's on the CPU: one ``ScaledDotProductFlashAttentionForCpuBackward0`` node
    where it runs its fused kernel (4-D inputs of one batch size, Ev = E, no dropout, no mask needing a gradient),
    its reference path's ops elsewhere, and zeros tied to the inputs where there is no query or key.

    >>> import trainkit
    >>> q = k = v = trainkit.ones(1, 2, 4)
    >>> scaled_dot_product_attention(q, k, v, is_causal=True)
    tensor([[[1., 1., 1., 1.],
             [1., 1., 1., 1.]]])
    """
    if enabled_threads:  # only while some thread has autocast on
        query, key, value, attn_mask = autocast_inputs("scaled_dot_product_attention", query, key, value, attn_mask)
    k_groups, v_groups = _check(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else math.inf
    if _no_work(query, key, value, k_groups, v_groups):
        return _empty_attention(query, key, value, k_groups, v_groups)
    if not _flash_path(query, key, value, attn_mask, dropout_p, k_groups, v_groups):
        scale, dropout_p = float(scale), float(dropout_p)
        return _math_attention(query, key, value, attn_mask, scale, dropout_p, is_causal, k_groups, v_groups)
    low = query._data.dtype == BFLOAT16_NP  # the fused op runs on float32 BLAS: attend in float32, round once
    if low:
        query, key, value = query.float(), key.float(), value.float()
        attn_mask = attn_mask.float() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    out = ScaledDotProductAttention.apply(
        query,
        key,
        value,
        attn_mask,
        scale=float(scale),
        dropout_p=float(dropout_p),
        is_causal=bool(is_causal),
        k_groups=k_groups,
        v_groups=v_groups,
    )
    node = out._grad_fn
    if node is not None and type(node) is ScaledDotProductAttention:
        p = _swap(node.extra[0])
        node.saved_labels = {len(node._saved): "the attention weights P"}  # the explorer's name for it
        node._saved.append((p, p, 0, _NO_COUNTER))  # P, for backward: listed, with its bytes, by the graph views
    return out.to(bfloat16) if low else out
