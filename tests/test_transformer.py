"""nn.Transformer and its encoder / decoder layers and stacks against torch.nn: the same weights (torch's state_dict
copied in), the same inputs and masks, values and gradients of the inputs and every parameter in float32 and
float64; state_dict names, initialisation, deep copies, warnings and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit

E, H, FF = 8, 2, 16  # d_model, heads, feed-forward width of the small layers
S, T, N = 5, 4, 3  # source length, target length, batch
TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-11)}


def _copy_weights(ours, theirs) -> None:
    ours.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def _lib_value(lib, value, device):
    """A NumPy array as ``lib``'s tensor; a dict by library name picks that library's value; else as is."""
    if isinstance(value, np.ndarray):
        return lib.tensor(value, device=device)
    if isinstance(value, dict):
        value = value[lib.__name__]
        return value.to(device) if hasattr(value, "to") else value
    return value


def _run(lib, module, inputs, kwargs, weight, device="cpu"):
    xs = [lib.tensor(a, requires_grad=True, device=device) for a in inputs]
    out = module(*xs, **{k: _lib_value(lib, v, device) for k, v in kwargs.items()})
    if weight is None:
        weight = np.random.default_rng(1).normal(size=tuple(out.shape)).astype(inputs[0].dtype)
    (out * lib.tensor(weight, device=device)).sum().backward()
    grads = {name: p.grad for name, p in module.named_parameters()}
    return out, [x.grad for x in xs], grads, weight


def _assert_parity(torch, make, inputs, kwargs=None, dtype="float64", device="cpu"):
    """``make(lib, dtype)`` builds the module in each library; torch's weights go into ours; the outputs and the
    gradients of a weighted sum (inputs and parameters) must agree."""
    kwargs = kwargs or {}
    torch.manual_seed(0)
    theirs = make(torch, getattr(torch, dtype))
    ours = make(trainkit, getattr(trainkit, dtype))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _copy_weights(ours, theirs)
    ours.to(device)
    inputs = [a.astype(dtype) for a in inputs]
    t_out, t_dx, t_dp, weight = _run(torch, theirs, inputs, kwargs, None)
    o_out, o_dx, o_dp, _ = _run(trainkit, ours, inputs, kwargs, weight, device)
    assert o_out.device.type == device
    tol = TOL[dtype]
    assert o_out.dtype == getattr(trainkit, dtype)
    np.testing.assert_allclose(to_numpy(o_out), to_numpy(t_out), **tol)
    for got, expected in zip(o_dx, t_dx):
        np.testing.assert_allclose(to_numpy(got), to_numpy(expected), **tol)
    assert list(o_dp) == list(t_dp)
    for name, expected in t_dp.items():
        assert o_dp[name] is not None, name
        np.testing.assert_allclose(to_numpy(o_dp[name]), to_numpy(expected), err_msg=name, **tol)
    return ours, theirs


def _float_mask(rng, shape, dtype="float64"):
    """An additive mask: small values, with -inf at a few places but never a whole row."""
    mask = rng.normal(size=shape) * 0.5
    mask[..., 0, 1] = -np.inf
    return mask.astype(dtype)


def _padding(batch, length):
    """Key padding: True (leave out) at the end of some sequences, never a whole sequence."""
    pad = np.zeros((batch, length), dtype=bool)
    pad[0, -2:] = True
    pad[-1, -1] = True
    return pad


def _causal(length):
    return np.triu(np.full((length, length), -np.inf), 1)


ENCODER_CASES = {
    "post-norm": ({}, {}),
    "pre-norm": ({"norm_first": True}, {}),
    "gelu": ({"activation": "gelu"}, {}),
    "callable": ({"activation": {"torch": lambda x: x.tanh(), "trainkit": lambda x: x.tanh()}}, {}),
    "gelu-module": ({"activation": {"torch": "GELU", "trainkit": "GELU"}}, {}),
    "batch-first": ({"batch_first": True}, {}),
    "float-mask": ({}, {"src_mask": "float"}),
    "bool-mask": ({"norm_first": True}, {"src_mask": "bool"}),
    "padding": ({"batch_first": True}, {"src_key_padding_mask": "bool"}),
    "float-padding": ({}, {"src_key_padding_mask": "float"}),
    "mask-and-padding": ({}, {"src_mask": "bool", "src_key_padding_mask": "bool"}),
    "causal": ({"norm_first": True}, {"src_mask": "causal", "is_causal": True}),
    "no-bias": ({"bias": False}, {}),
}


def _layer_kwargs(lib, options):
    out = {}
    for key, value in options.items():
        if isinstance(value, dict):
            value = value[lib.__name__]
            if value == "GELU":
                value = lib.nn.GELU()
        out[key] = value
    return out


def _masks(spec, dtype, length, batch, rng):
    out = {}
    for key, kind in spec.items():
        if kind == "float" and "padding" in key:
            pad = np.where(_padding(batch, length), -np.inf, rng.normal(size=(batch, length)) * 0.3)
            out[key] = pad.astype(dtype)
        elif kind == "float":
            out[key] = _float_mask(rng, (length, length), dtype)
        elif kind == "bool" and "padding" in key:
            out[key] = _padding(batch, length)
        elif kind == "bool":
            out[key] = np.isinf(_float_mask(rng, (length, length)))
        elif kind == "causal":
            out[key] = _causal(length).astype(dtype)
        else:
            out[key] = kind
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(ENCODER_CASES))
def test_encoder_layer_matches_torch(case, dtype, device, torch, rng):
    options, masks = ENCODER_CASES[case]

    def make(lib, dt):
        return lib.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, dtype=dt, **_layer_kwargs(lib, options))

    batch_first = options.get("batch_first", False)
    x = rng.normal(size=(N, S, E) if batch_first else (S, N, E))
    _assert_parity(torch, make, [x], _masks(masks, dtype, S, N, rng), dtype, device)


@pytest.mark.parametrize("masks", [{}, {"src_mask": "bool", "src_key_padding_mask": "bool"}])
def test_encoder_layer_unbatched_input_matches_torch(masks, torch, rng):
    def make(lib, dt):
        return lib.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, dtype=dt)

    spec = _masks(masks, "float64", S, 1, rng)
    if "src_key_padding_mask" in spec:
        spec["src_key_padding_mask"] = spec["src_key_padding_mask"][0]
    _assert_parity(torch, make, [rng.normal(size=(S, E))], spec)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["post-norm", "pre-norm", "masks", "batch-first-padding", "causal"])
def test_decoder_layer_matches_torch(case, dtype, torch, rng):
    options = {"pre-norm": {"norm_first": True}, "batch-first-padding": {"batch_first": True}}.get(case, {})

    def make(lib, dt):
        return lib.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation="gelu", dtype=dt, **options)

    batch_first = options.get("batch_first", False)
    tgt = rng.normal(size=(N, T, E) if batch_first else (T, N, E))
    memory = rng.normal(size=(N, S, E) if batch_first else (S, N, E))
    kwargs = {}
    if case == "masks":
        kwargs = {"tgt_mask": _causal(T).astype(dtype), "memory_mask": _float_mask(rng, (T, S), dtype)}
    elif case == "batch-first-padding":
        kwargs = {
            "tgt_key_padding_mask": _padding(N, T),
            "memory_key_padding_mask": _padding(N, S),
            "memory_mask": np.isinf(_float_mask(rng, (T, S))),
        }
    elif case == "causal":
        kwargs = {"tgt_mask": np.isinf(_causal(T)), "tgt_is_causal": True}
    _assert_parity(torch, make, [tgt, memory], kwargs, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_with_a_final_norm_matches_torch(norm_first, dtype, torch, rng):
    def make(lib, dt):
        layer = lib.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, norm_first=norm_first, batch_first=True, dtype=dt)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(E, dtype=dt))

    kwargs = {"mask": _causal(S).astype(dtype), "src_key_padding_mask": _padding(N, S).astype(dtype) * -1e9}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested-tensor note when norm_first; tested on its own below
        ours, _ = _assert_parity(torch, make, [rng.normal(size=(N, S, E))], kwargs, dtype)
    assert len(ours.layers) == 2 and ours.num_layers == 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_decoder_stack_with_a_final_norm_matches_torch(dtype, torch, rng):
    def make(lib, dt):
        layer = lib.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, dtype=dt)
        return lib.nn.TransformerDecoder(layer, 2, norm=lib.nn.LayerNorm(E, dtype=dt))

    kwargs = {"tgt_mask": _causal(T).astype(dtype), "memory_key_padding_mask": _padding(N, S)}
    _assert_parity(torch, make, [rng.normal(size=(T, N, E)), rng.normal(size=(S, N, E))], kwargs, dtype)
    # a boolean causal mask is recognised as causal too (tgt_is_causal=None), with and without padding
    kwargs = {"tgt_mask": np.isinf(_causal(T)), "tgt_key_padding_mask": _padding(N, T)}
    _assert_parity(torch, make, [rng.normal(size=(T, N, E)), rng.normal(size=(S, N, E))], kwargs, dtype)
    kwargs = {"tgt_mask": np.isinf(_causal(T)), "memory_mask": np.isinf(_float_mask(rng, (T, S)))}
    _assert_parity(torch, make, [rng.normal(size=(T, N, E)), rng.normal(size=(S, N, E))], kwargs, dtype)


def _small_transformer(lib, dt, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.nn.Transformer(
            d_model=16,
            nhead=2,
            num_encoder_layers=2,
            num_decoder_layers=2,
            dim_feedforward=32,
            dropout=0.0,
            dtype=dt,
            **options,
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_end_to_end_matches_torch(batch_first, dtype, device, torch, rng):
    def make(lib, dt):
        return _small_transformer(lib, dt, batch_first=batch_first)

    src = rng.normal(size=(N, 7, 16) if batch_first else (7, N, 16))
    tgt = rng.normal(size=(N, T, 16) if batch_first else (T, N, 16))
    mask = {
        lib.__name__: lib.nn.Transformer.generate_square_subsequent_mask(T, dtype=getattr(lib, dtype))
        for lib in (torch, trainkit)
    }
    kwargs = {
        "tgt_mask": mask,
        "src_key_padding_mask": _padding(N, 7),
        "memory_key_padding_mask": _padding(N, 7),
        "tgt_is_causal": True,
    }
    _assert_parity(torch, make, [src, tgt], kwargs, dtype, device)


def test_transformer_unbatched_and_pre_norm_match_torch(torch, rng):
    def make(lib, dt):
        return _small_transformer(lib, dt, norm_first=True, activation="gelu")

    _assert_parity(
        torch,
        make,
        [rng.normal(size=(6, 16)), rng.normal(size=(T, 16))],
        {"src_mask": _float_mask(rng, (6, 6)), "memory_mask": np.isinf(_float_mask(rng, (T, 6)))},
    )


@pytest.mark.parametrize("padding", ["none", "ends", "not-ends", "float-ends"])
def test_eval_mode_values_match_torchs_fused_path(padding, torch, rng):
    """In evaluation without a graph torch runs a fused path; with a padding mask that pads only the ends of the
    sequences its encoder stack packs them into a nested tensor and gives 0 at the padded positions (before the
    final norm). Our values follow, with and without a graph."""
    x = rng.normal(size=(N, S, E)).astype(np.float32)
    pad = _padding(N, S)
    if padding == "not-ends":
        pad[1, 0] = True
    masks = {"none": None, "ends": pad, "not-ends": pad, "float-ends": np.where(pad, -np.inf, 0).astype(np.float32)}

    def make(lib, dt):
        layer = lib.nn.TransformerEncoderLayer(E, H, FF, batch_first=True, dtype=dt)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(E)).eval()

    torch.manual_seed(0)
    theirs, ours = make(torch, torch.float32), make(trainkit, trainkit.float32)
    _copy_weights(ours, theirs)
    kwargs = {} if masks[padding] is None else {"src_key_padding_mask": masks[padding]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on nested tensors being a prototype
        with torch.no_grad(), trainkit.no_grad():
            expected = to_numpy(theirs(torch.tensor(x), **{k: torch.tensor(v) for k, v in kwargs.items()}))
            got = to_numpy(ours(trainkit.tensor(x), **{k: trainkit.tensor(v) for k, v in kwargs.items()}))
        np.testing.assert_allclose(got, expected, **TOL["float32"])
        expected = to_numpy(theirs(torch.tensor(x), **{k: torch.tensor(v) for k, v in kwargs.items()}))
        got = to_numpy(ours(trainkit.tensor(x), **{k: trainkit.tensor(v) for k, v in kwargs.items()}))
        np.testing.assert_allclose(got, expected, **TOL["float32"])


def test_square_subsequent_mask_matches_torch(torch):
    for size in (0, 1, 4):
        got = trainkit.nn.Transformer.generate_square_subsequent_mask(size)
        expected = torch.nn.Transformer.generate_square_subsequent_mask(size)
        assert got.dtype == trainkit.float32 and tuple(got.shape) == (size, size)
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))
    got = trainkit.nn.Transformer.generate_square_subsequent_mask(3, device="cpu", dtype=trainkit.float64)
    assert got.dtype == trainkit.float64 and not got.requires_grad


@pytest.mark.parametrize("name", ["encoder-layer", "decoder-layer", "transformer", "gelu-module"])
def test_state_dict_keys_and_modules_as_torch(name, torch):
    def make(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "encoder-layer":
                return lib.nn.TransformerEncoderLayer(E, H, FF)
            if name == "decoder-layer":
                return lib.nn.TransformerDecoderLayer(E, H, FF, bias=False)
            if name == "gelu-module":
                return lib.nn.TransformerEncoderLayer(E, H, FF, activation=lib.nn.GELU())
            return lib.nn.Transformer(E, H, 2, 1, FF)

    ours, theirs = make(trainkit), make(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    assert repr(ours) == repr(theirs)
    theirs.eval()
    _copy_weights(ours, theirs)
    ours.eval()
    for key, value in ours.state_dict().items():
        np.testing.assert_array_equal(to_numpy(value), to_numpy(theirs.state_dict()[key]))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_attributes_as_torch(torch):
    for lib in (trainkit, torch):
        layer = lib.nn.TransformerEncoderLayer(E, H, activation="gelu", norm_first=True, layer_norm_eps=1e-6)
        assert layer.activation is lib.nn.functional.gelu and layer.activation_relu_or_gelu == 2
        assert layer.norm_first and layer.norm1.eps == 1e-6 and layer.linear1.out_features == 2048
        assert layer.dropout.p == 0.1 and layer.self_attn.dropout == 0.1
        assert lib.nn.TransformerEncoderLayer(E, H).activation is lib.nn.functional.relu
        assert lib.nn.TransformerEncoderLayer(E, H, activation=lib.tanh).activation_relu_or_gelu == 0
        assert lib.nn.TransformerEncoderLayer(E, H, activation=lib.nn.ReLU()).activation_relu_or_gelu == 1
        assert lib.nn.TransformerDecoderLayer(E, H, activation="gelu").activation is lib.nn.functional.gelu
        encoder = lib.nn.TransformerEncoder(
            lib.nn.TransformerEncoderLayer(E, H, batch_first=True), 2, enable_nested_tensor=False, mask_check=False
        )
        assert not encoder.enable_nested_tensor and not encoder.use_nested_tensor and not encoder.mask_check
        model = _small_transformer(lib, None, batch_first=True)
        assert (model.d_model, model.nhead, model.batch_first) == (16, 2, True)
        assert model.encoder.norm.eps == 1e-5 and model.decoder.num_layers == 2


def test_transformer_initialisation_is_xavier_uniform():
    trainkit.manual_seed(0)
    model = _small_transformer(trainkit, None)
    for name, p in model.named_parameters():
        values = to_numpy(p)
        if p.dim() > 1:
            fan_out, fan_in = p.shape
            bound = np.sqrt(6.0 / (fan_in + fan_out))
            assert np.abs(values).max() <= bound, name
            assert np.abs(values).max() > 0.8 * bound, name
            assert abs(values.std() - bound / np.sqrt(3)) < 0.25 * bound / np.sqrt(3), name
        elif "norm" in name and name.endswith("weight"):
            assert (values == 1).all(), name
        elif "norm" in name or "proj_bias" in name or "out_proj.bias" in name:
            assert (values == 0).all(), name
        else:  # the feed-forward biases keep Linear's U(-1/sqrt(in), 1/sqrt(in))
            assert np.abs(values).max() <= 1 / np.sqrt(16 if "linear1" in name else 32), name


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_custom_encoder_and_decoder_are_used_and_reinitialised(torch):
    for lib in (trainkit, torch):
        encoder = lib.nn.TransformerEncoder(
            lib.nn.TransformerEncoderLayer(16, 2, 32, norm_first=True), 1, enable_nested_tensor=False
        )
        decoder = lib.nn.TransformerDecoder(lib.nn.TransformerDecoderLayer(16, 2, 32), 1)
        with lib.no_grad():
            encoder.layers[0].linear1.weight.fill_(5.0)
        model = lib.nn.Transformer(16, 2, custom_encoder=encoder, custom_decoder=decoder, dtype=lib.float64)
        assert model.encoder is encoder and model.decoder is decoder
        assert float(model.encoder.layers[0].linear1.weight.detach().abs().max()) < 1
        assert model.encoder.norm is None and model.encoder.layers[0].norm_first
        out = model(lib.zeros(5, 2, 16), lib.zeros(3, 2, 16))
        assert tuple(out.shape) == (3, 2, 16) and out.dtype == lib.float32  # the custom stacks are float32
    keys = [
        list(lib.nn.Transformer(16, 2, 1, 2, 32, custom_decoder=lib.nn.Linear(2, 2)).state_dict())
        for lib in (trainkit, torch)
    ]
    assert keys[0] == keys[1] and keys[0][-1] == "decoder.bias"


def test_stacks_deep_copy_the_layer_into_independent_layers():
    trainkit.manual_seed(0)
    layer = trainkit.nn.TransformerDecoderLayer(E, H, FF)
    decoder = trainkit.nn.TransformerDecoder(layer, 3)
    assert isinstance(decoder.layers, trainkit.nn.ModuleList) and len(decoder.layers) == 3
    names = [n for n, _ in layer.named_parameters()]
    for copy in decoder.layers:
        assert copy is not layer
        for name in names:
            mine, original = copy.get_parameter(name), layer.get_parameter(name)
            assert mine is not original
            np.testing.assert_array_equal(to_numpy(mine), to_numpy(original))
    before = to_numpy(decoder.layers[1].self_attn.in_proj_weight).copy()
    with trainkit.no_grad():
        decoder.layers[0].self_attn.in_proj_weight.fill_(3.0)
        decoder.layers[0].linear1.weight.add_(1.0)
    np.testing.assert_array_equal(to_numpy(decoder.layers[1].self_attn.in_proj_weight), before)
    np.testing.assert_array_equal(to_numpy(layer.self_attn.in_proj_weight), before)
    assert not np.allclose(to_numpy(layer.linear1.weight), to_numpy(decoder.layers[0].linear1.weight))
    assert len(list(decoder.parameters())) == 3 * len(names)


def test_dropout_acts_in_training_only():
    trainkit.manual_seed(0)
    layer = trainkit.nn.TransformerEncoderLayer(E, H, FF, dropout=0.5)
    x = trainkit.randn(S, N, E)
    assert not np.allclose(to_numpy(layer(x)), to_numpy(layer(x)))
    layer.eval()
    np.testing.assert_array_equal(to_numpy(layer(x)), to_numpy(layer(x)))


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _stack_warnings(lib, *args, **kwargs):
    return _caught(lambda: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(*args, **kwargs), 1))


def test_warnings_as_torch(torch, rng):
    for args, kwargs in (
        ((E, H), {}),
        ((E, H), {"batch_first": True, "norm_first": True}),
        ((E, H), {"batch_first": True, "activation": "gelu"}),
        ((E, H), {"batch_first": True}),
        ((E, H), {"batch_first": True, "activation": trainkit.tanh}),
        ((9, 3), {"batch_first": True}),
        ((E, H), {"batch_first": True, "bias": False}),
    ):
        if kwargs.get("activation") is trainkit.tanh:
            expected = _stack_warnings(torch, *args, **{**kwargs, "activation": torch.tanh})
        else:
            expected = _stack_warnings(torch, *args, **kwargs)
        assert _stack_warnings(trainkit, *args, **kwargs) == expected
    x = rng.normal(size=(S, N, E)).astype(np.float32)
    padding, mask = _padding(N, S), _causal(S).astype(np.float32)

    def mismatched(lib):
        layer = lib.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0)
        return lambda: layer(lib.tensor(x), src_mask=lib.tensor(mask), src_key_padding_mask=lib.tensor(padding))

    expected = [m for m in _caught(mismatched(torch)) if "mismatched" in m]
    assert expected and [m for m in _caught(mismatched(trainkit)) if "mismatched" in m] == expected


def test_errors_match_torch(torch):
    def bad_activation(lib, dev):
        lib.nn.TransformerEncoderLayer(E, H, activation="tanh")

    def bad_decoder_activation(lib, dev):
        lib.nn.TransformerDecoderLayer(E, H, activation="sigmoid")

    assert_same_error(torch, bad_activation, "activation should be relu/gelu, not tanh")
    assert_same_error(torch, bad_decoder_activation, "activation should be relu/gelu, not sigmoid")

    def model(lib, **options):
        return _small_transformer(lib, None, **options)

    def batch_mismatch(lib, dev):
        model(lib)(lib.zeros(5, 2, 16), lib.zeros(4, 3, 16))

    def batch_first_mismatch(lib, dev):
        model(lib, batch_first=True)(lib.zeros(2, 5, 16), lib.zeros(3, 4, 16))

    def feature_mismatch(lib, dev):
        model(lib)(lib.zeros(5, 2, 16), lib.zeros(4, 2, 8))

    assert_same_error(torch, batch_mismatch, "the batch number of src and tgt must be equal")
    assert_same_error(torch, batch_first_mismatch, "the batch number of src and tgt must be equal")
    assert_same_error(torch, feature_mismatch, "the feature number of src and tgt must be equal to d_model")

    def int_mask(lib, dev):
        layer = lib.nn.TransformerEncoderLayer(E, H, FF)
        layer(lib.zeros(S, N, E), src_mask=lib.zeros(S, S, dtype=lib.int64))

    def int_padding(lib, dev):
        layer = lib.nn.TransformerEncoderLayer(E, H, FF)
        encoder = lib.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        encoder(lib.zeros(S, N, E), src_key_padding_mask=lib.zeros(N, S, dtype=lib.int64))

    def causal_without_mask(lib, dev):
        lib.nn.TransformerEncoderLayer(E, H, FF)(lib.zeros(S, N, E), is_causal=True)

    def heads_not_dividing(lib, dev):
        lib.nn.TransformerDecoderLayer(E, 3, FF)

    def wrong_width(lib, dev):
        lib.nn.TransformerEncoderLayer(E, H, FF)(lib.zeros(S, N, E - 1))

    def unbatched_src_batched_tgt(lib, dev):
        model(lib)(lib.zeros(5, 16), lib.zeros(4, 2, 16))

    assert_same_error(torch, causal_without_mask, "Need attn_mask if specifying the is_causal hint")
    assert_same_error(torch, heads_not_dividing, "embed_dim must be divisible by num_heads")
    assert_same_error(torch, wrong_width, "was expecting embedding dimension of 8, but got 7")
    assert_same_error(torch, unbatched_src_batched_tgt, "expected `key` and `value` to be 3-D")
    assert_same_error(torch, int_mask, "only bool and floating types of src_mask are supported")
    assert_same_error(torch, int_padding, "only bool and floating types of src_key_padding_mask are supported")


def _node_counts(out, names):
    counts, seen, stack = dict.fromkeys(names, 0), set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if type(node).__name__ in counts:
            counts[type(node).__name__] += 1
        stack.extend(f for f, _ in node.next_functions)
    return counts


@pytest.mark.parametrize("norm_first", [False, True])
def test_graph_takes_the_fused_attention_as_torch(norm_first, torch):
    """need_weights=False: each attention is one fused attention node, as in torch's graph."""
    names = [
        "ScaledDotProductFlashAttentionForCpuBackward0",
        "NativeLayerNormBackward0",
        "GeluBackward0",
        "AddmmBackward0",
    ]
    counts = []
    for lib in (torch, trainkit):
        lib.manual_seed(0)
        layer = lib.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation="gelu", norm_first=norm_first)
        tgt, memory = lib.randn(T, N, E, requires_grad=True), lib.randn(S, N, E)
        mask = lib.nn.Transformer.generate_square_subsequent_mask(T)
        counts.append(_node_counts(layer(tgt, memory, tgt_mask=mask, tgt_is_causal=True), names))
    assert counts[1] == counts[0] and counts[0][names[0]] == 2


def test_encoder_layer_gradcheck_and_gradgradcheck():
    """Twice differentiable end to end (attention, norms, feed-forward) in float64."""
    trainkit.manual_seed(0)
    layer = trainkit.nn.TransformerEncoderLayer(
        4, 2, 6, dropout=0.0, activation="gelu", norm_first=True, dtype=trainkit.float64
    )
    mask = trainkit.tensor(np.triu(np.ones((3, 3), dtype=bool), 1))
    x = trainkit.randn(3, 2, 4, dtype=trainkit.float64, requires_grad=True)

    def fn(x):
        return layer(x, src_mask=mask)

    assert trainkit.autograd.gradcheck(fn, (x,))
    assert trainkit.autograd.gradgradcheck(fn, (x,))
