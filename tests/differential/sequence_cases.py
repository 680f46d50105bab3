"""Argument templates for the sequence-model functions: 1-d convolution and pooling, attention, sampling."""

from __future__ import annotations

from .harness import T


def _convolutions_1d(b) -> None:
    x = T((2, 3, 9))
    for w, kwargs in [
        (T((4, 3, 3)), {}),
        (T((4, 3, 3)), {"bias": T((4,)), "stride": 2, "padding": 1}),
        (T((4, 3, 2)), {"padding": "same", "dilation": 3}),
        (T((4, 3, 3)), {"padding": "valid"}),
        (T((6, 1, 3)), {"groups": 3}),
        (T((4, 3, 3), "f64"), {}),
        (T((4, 2, 3)), {}),
        (T((4, 3, 11)), {}),
    ]:
        b.call("F.conv1d", x, w, **kwargs)
    b.call("F.conv1d", T((3, 9)), T((4, 3, 3)))
    b.call("F.conv1d", T((2, 3, 9), layout="T"), T((4, 3, 3)))
    b.call("F.conv1d", T((2, 3, 9), domain="edge"), T((4, 3, 3)))
    b.call("F.conv1d", T((0, 3, 9)), T((4, 3, 3)))
    for w, kwargs in [
        (T((3, 4, 3)), {}),
        (T((3, 4, 3)), {"stride": 2, "output_padding": 1, "bias": T((4,))}),
        (T((3, 2, 3)), {"groups": 3}),
        (T((3, 4, 2)), {"dilation": 2, "padding": 1}),
    ]:
        b.call("F.conv_transpose1d", x, w, **kwargs)
    for kwargs in (
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "ceil_mode": True},
        {"kernel_size": 4},
        {"kernel_size": 10},
    ):
        b.call("F.max_pool1d", x, **kwargs)
        b.call("F.avg_pool1d", x, **kwargs)
    b.call("F.max_pool1d", x, 2, dilation=2)
    b.call("F.max_pool1d", x, 3, return_indices=True)
    b.call("F.max_pool1d", T((3, 9), domain="edge"), 2)
    b.call("F.avg_pool1d", x, 3, padding=1, count_include_pad=False)
    for size in (1, 4, 9, 5, 0):
        b.call("F.adaptive_avg_pool1d", x, size)
        b.call("F.adaptive_max_pool1d", x, size)
    b.call("F.adaptive_max_pool1d", x, 4, return_indices=True)
    b.call("F.adaptive_avg_pool1d", T((3, 9), "f64"), 2)
    b.call("F.max_pool1d_with_indices", x, 3, stride=2)
    b.call("F.max_pool1d_with_indices", T((3, 9), domain="edge"), 2, padding=1)
    b.call("F.adaptive_max_pool1d_with_indices", x, 4)
    b.call("F.adaptive_max_pool1d_with_indices", T((3, 9), "f64"), 2)


def _attention(b) -> None:
    sdpa = "F.scaled_dot_product_attention"
    q, k, v = T((2, 2, 5, 4)), T((2, 2, 6, 4)), T((2, 2, 6, 3))
    b.call(sdpa, q, k, v)
    b.call(sdpa, q, T((2, 2, 5, 4)), T((2, 2, 5, 3)), is_causal=True)
    b.call(sdpa, q, k, v, is_causal=True)
    b.call(sdpa, q, k, v, scale=0.3)
    b.call(sdpa, q, k, v, attn_mask=T((5, 6)))
    b.call(sdpa, q, k, v, attn_mask=T((2, 1, 5, 6), "b"))
    b.call(sdpa, q, k, v, attn_mask=T((5, 6), "b"), is_causal=True)
    b.call(sdpa, T((5, 4)), T((6, 4)), T((6, 4)))
    b.call(sdpa, T((2, 4, 5, 4)), k, v, enable_gqa=True)
    b.call(sdpa, T((2, 3, 5, 4)), k, v, enable_gqa=True)
    b.call(sdpa, T((2, 2, 5, 4), "f64"), T((2, 2, 6, 4), "f64"), T((2, 2, 6, 3), "f64"))
    b.call(sdpa, T((2, 2, 5, 4), domain="edge"), k, v)
    b.call(sdpa, q, T((2, 2, 6, 5)), v)
    b.call(sdpa, T((2, 2, 0, 4)), k, v)
    # where PyTorch's CPU takes its fused kernel (Ev = E, 4-D, one batch size) and where its reference path
    b.call(sdpa, q, k, T((2, 2, 6, 4)))
    b.call(sdpa, q, k, T((2, 2, 6, 4)), attn_mask=T((2, 2, 5, 6), "b"))
    b.call(sdpa, q, k, T((2, 2, 6, 4)), attn_mask=T((2, 5, 6), "b"))
    b.call(sdpa, T((3, 5, 4)), T((3, 6, 4)), T((3, 6, 4)))
    b.call(sdpa, q, T((1, 2, 6, 4)), T((2, 2, 6, 4)))
    b.call(sdpa, q, T((2, 1, 6, 4)), T((2, 1, 6, 4)))
    b.call(sdpa, q, T((2, 2, 0, 4)), T((2, 2, 0, 3)))
    b.call(sdpa, q, k, T((2, 2, 6, 0)))
    b.call(sdpa, T((2, 2, 5, 0)), T((2, 2, 6, 0)), v)
    b.call(sdpa, T((2, 2, 1, 4)), k, T((2, 2, 6, 4)), is_causal=True)
    mha = "F.multi_head_attention_forward"
    e = 8
    query, key = T((5, 2, e)), T((6, 2, e))
    weights = (T((3 * e, e)), T((3 * e,)))
    out = (T((e, e)), T((e,)))
    base = (e, 2, *weights, None, None, False, 0.0, *out)
    b.call(mha, query, key, key, *base, training=False)
    b.call(
        mha,
        query,
        key,
        key,
        *base,
        training=False,
        key_padding_mask=T((2, 6), "b", grad=False),
        average_attn_weights=False,
    )
    b.call(mha, query, key, key, *base, training=False, attn_mask=T((5, 6)), need_weights=False)
    b.call(mha, query, query, query, e, 2, *weights, T((1, 1, e)), T((1, 1, e)), True, 0.0, *out, training=False)
    b.call(mha, T((5, e)), T((6, e)), T((6, e)), *base, training=False)
    b.call(mha, query, key, key, 7, 2, *weights, None, None, False, 0.0, *out)


def _sampling(b) -> None:
    for args, kwargs in [
        ((T((5,), domain="pos", grad=False), 3), {}),
        ((T((3, 6), domain="pos", grad=False), 4), {"replacement": True}),
        ((T((3, 6), domain="pos", grad=False), 7), {}),
        ((T((4,), domain="pos", grad=False), 10), {"replacement": True}),
        ((T((2, 3), "f64", domain="pos", grad=False), 2), {}),
        ((T((2, 3, 4), domain="pos", grad=False), 2), {}),
        ((T((4,), grad=False, value=[0.0, 0.0, 0.0, 0.0]), 1), {}),
        ((T((4,), grad=False, value=[1.0, -1.0, 2.0, 0.5]), 1), {}),
    ]:
        b.each("multinomial", *args, values=False, **kwargs)


def sequences(b) -> None:
    """1-d convolution and pooling, attention and multinomial sampling."""
    _convolutions_1d(b)
    _attention(b)
    _sampling(b)
