"""Multi-head attention as ``nn.MultiheadAttention`` computes it: ``F.multi_head_attention_forward``.

The query, key and value are projected (one packed (3E, E) weight, or three when key and value have other sizes),
split into heads, optionally extended by learned bias rows and a zero row, and attended through
``scaled_dot_product_attention``; the masks are merged as PyTorch merges them (``key_padding_mask`` True = ignore,
a boolean ``attn_mask`` True = not allowed). With ``need_weights`` the attention weights are computed with ordinary
ops, averaged over heads unless asked otherwise.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd.backend import kind_of, xp_of
from ..autograd.ops.shape import cat
from ..autograd.tensor import Tensor
from .activation import softmax
from .attention import scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .padding import pad

__all__ = ["canonical_mask", "multi_head_attention_forward"]


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """PyTorch's checks of the dimensions; True for a batched (3-D) query."""
    if query.ndim not in (2, 3):
        raise AssertionError(
            f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query tensor"
        )
    kind = "batched (3-D)" if query.ndim == 3 else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(
            f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively"
        )
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(
            f"For {kind} `query`, expected `key_padding_mask` to be `None` or {query.ndim - 1}-D "
            f"but found {key_padding_mask.ndim}-D tensor instead"
        )
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise AssertionError(
            f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
            f"{attn_mask.ndim}-D tensor instead"
        )
    expected = (num_heads, query.shape[0], key.shape[0])
    if query.ndim == 2 and attn_mask is not None and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
        raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return query.ndim == 3


def canonical_mask(
    mask: Tensor | None, mask_name: str, other_type, other_name: str, target_type, check_other: bool = True
) -> Tensor | None:
    """A boolean mask (True = masked out) as an additive float mask of ``target_type`` (-inf where True); a float
    mask as it is. Warns, as PyTorch does, when ``other_type`` (the other mask's dtype) differs."""
    if mask is None:
        return None
    dt = mask._data.dtype
    if dt != np.bool_ and kind_of(dt) != "f":
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and dt != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=2,
        )
    if dt == np.bool_:
        xp = xp_of(mask._data)
        return Tensor._make(
            xp.where(mask._data, xp.asarray(-xp.inf, dtype=target_type), xp.zeros((), dtype=target_type))
        )
    return mask


def _dtype_or_none(mask):
    return None if mask is None else mask._data.dtype


def _in_projection_packed(q, k, v, w, b):
    """q, k and v projected by the three blocks of rows of ``w`` (and ``b``), with one product for the blocks that
    share an input (all three in self-attention)."""
    E = q.shape[-1]
    if k is v:
        if q is k:
            return linear(q, w, b).chunk(3, dim=-1)
        w_q, w_kv = w.split([E, 2 * E])
        b_q, b_kv = (None, None) if b is None else b.split([E, 2 * E])
        return (linear(q, w_q, b_q),) + tuple(linear(k, w_kv, b_kv).chunk(2, dim=-1))
    ws = w.chunk(3)
    bs = (None,) * 3 if b is None else b.chunk(3)
    return tuple(linear(x, wi, bi) for x, wi, bi in zip((q, k, v), ws, bs))


def _heads(x: Tensor, static: Tensor | None, name: str, bsz: int, num_heads: int, head_dim: int) -> Tensor:
    """(S, N, E) as (N, H, S, head_dim), or the given ``static_k``/``static_v`` of shape (N * H, S, head_dim)."""
    if static is None:
        return x.reshape(x.shape[0], bsz, num_heads, head_dim).permute(1, 2, 0, 3)
    if static.shape[0] != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static.reshape(bsz, num_heads, static.shape[1], head_dim)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on (L, N, E) query and (S, N, E) key/value (or unbatched (L, E), (S, E)).

    Each of H heads attends with its own slice of the projected q, k, v: softmax(q_h k_h^T / sqrt(E / H) + mask)
    v_h; the heads are concatenated and projected by ``out_proj``. Masks: ``key_padding_mask`` (N, S) and
    ``attn_mask`` (L, S) or (N * H, L, S), boolean (True = may NOT attend) or float (added), summed into one.
    Returns the output and, with ``need_weights``, the attention weights (after dropout, as PyTorch returns them)
    averaged over the heads, or per head with ``average_attn_weights=False``; without, the fused
    ``scaled_dot_product_attention`` op does the work and the weights are None.

    >>> import trainkit
    >>> x = trainkit.ones(3, 1, 4)
    >>> w, b = trainkit.eye(4).repeat(3, 1), trainkit.zeros(12)
    >>> out, weights = multi_head_attention_forward(x, x, x, 4, 2, w, b, None, None, False, 0.0, trainkit.eye(4),
    ...                                             None)
    >>> out.shape, weights.shape
    (trainkit.Size([3, 1, 4]), trainkit.Size([1, 3, 3]))
    """
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    qdtype = query._data.dtype
    key_padding_mask = canonical_mask(
        key_padding_mask, "key_padding_mask", _dtype_or_none(attn_mask), "attn_mask", qdtype
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
            "method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the fused op applies the triangle itself
    else:
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", qdtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
            )
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        b_q, b_k, b_v = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)
    else:
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    # (N, H, L, head_dim) views: the products read them in place, whatever their strides
    q = q.reshape(tgt_len, bsz, num_heads, head_dim).permute(1, 2, 0, 3)
    k = _heads(k, static_k, "static_k", bsz, num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz, num_heads, head_dim)
    if add_zero_attn:
        zeros = Tensor._make(xp_of(k._data).zeros((bsz, num_heads, 1, head_dim), dtype=k._data.dtype))
        k = cat([k, zeros], dim=2)
        v = cat([v, zeros.to(v.dtype)], dim=2)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = k.shape[2]
    if attn_mask is not None:  # (1, 1, L, S) or (N, H, L, S)
        attn_mask = (
            attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
        )
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(
                f"Expected key_padded_mask.shape[1] to be {src_len}, but got {key_padding_mask.shape[1]}"
            )
        padding = key_padding_mask.reshape(bsz, 1, 1, src_len)
        attn_mask = padding if attn_mask is None else attn_mask + padding
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        # one batch of N * H heads, as PyTorch computes it: the weights it returns are a view of that batch
        q, k, v = (x.reshape(bsz * num_heads, x.shape[2], head_dim) for x in (q, k, v))
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask.expand(bsz, num_heads, tgt_len, src_len).reshape(scores.shape)
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = (weights @ v).view(bsz, num_heads, tgt_len, head_dim)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
    else:
        weights = None
        out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = linear(out.permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim), out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.shape[1])
    if weights is not None and average_attn_weights:
        weights = weights.mean(dim=1)
    if not is_batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights
