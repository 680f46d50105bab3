"""``torch.onnx.export``: models written as ONNX run in onnxruntime and give trainkit's outputs, at the traced
sizes and, through ``dynamic_axes``, at others; what cannot be exported is refused with the op and module named."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.nn import functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def seeded():
    """Each test draws its weights and inputs from the same seed, whatever ran before it."""
    trainkit.manual_seed(0)


def session(path_or_bytes) -> ort.InferenceSession:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else str(path_or_bytes)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def outputs_of(model, args) -> list[np.ndarray]:
    with trainkit.no_grad():
        out = model(*args)
    flat = []

    def walk(v):
        if isinstance(v, trainkit.Tensor):
            flat.append(v.numpy())
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)

    walk(out)
    return flat


def roundtrip(tmp_path, model, args, names, dynamic=None, others=(), atol=1e-5, **kwargs):
    """Export ``model`` on ``args``, then compare onnxruntime with trainkit on ``args`` and on each of ``others``."""
    model.eval()
    path = tmp_path / "model.onnx"
    trainkit.onnx.export(model, args, path, input_names=names, dynamic_axes=dynamic, **kwargs)
    onnx.checker.check_model(str(path))
    sess = session(path)
    for inputs in (args, *others):
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        want = outputs_of(model, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol)
    return onnx.load(str(path))


def ops_of(proto) -> set[str]:
    return {n.op_type for n in proto.graph.node}


# ----------------------------------------------------------------------------------------------- layer families
LAYERS = [
    ("linear", lambda: nn.Linear(4, 3), (2, 4), {0: "N"}, (5, 4), {"Gemm"}),
    ("linear-3d", lambda: nn.Linear(4, 3), (2, 5, 4), {0: "N", 1: "T"}, (3, 2, 4), {"MatMul"}),
    (
        "conv1d",
        lambda: nn.Conv1d(3, 6, 3, padding="same", dilation=2),
        (2, 3, 10),
        {0: "N", 2: "L"},
        (1, 3, 7),
        {"Conv"},
    ),
    (
        "conv2d",
        lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
        (2, 4, 9, 9),
        {0: "N"},
        (3, 4, 9, 9),
        {"Conv"},
    ),
    (
        "conv-transpose1d",
        lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, output_padding=1),
        (2, 3, 6),
        {0: "N"},
        (1, 3, 6),
        {"ConvTranspose"},
    ),
    (
        "conv-transpose2d",
        lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
        (2, 3, 5, 5),
        {0: "N", 2: "H", 3: "W"},
        (1, 3, 7, 4),
        {"ConvTranspose"},
    ),
    ("maxpool1d", lambda: nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 9), {0: "N", 2: "L"}, (3, 3, 12), {"MaxPool"}),
    ("maxpool2d", lambda: nn.MaxPool2d(2, ceil_mode=True), (2, 3, 7, 7), {0: "N"}, (1, 3, 7, 7), {"MaxPool"}),
    ("avgpool1d", lambda: nn.AvgPool1d(2), (2, 3, 8), {0: "N"}, (3, 3, 8), {"AveragePool"}),
    (
        "avgpool2d",
        lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        (2, 3, 7, 7),
        {0: "N"},
        (1, 3, 7, 7),
        {"AveragePool"},
    ),
    ("adaptive-avg1d", lambda: nn.AdaptiveAvgPool1d(1), (2, 3, 8), {0: "N", 2: "L"}, (3, 3, 5), {"GlobalAveragePool"}),
    ("adaptive-avg2d", lambda: nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 4, 6), {0: "N"}, (1, 3, 4, 6), {"AveragePool"}),
    ("batchnorm1d", lambda: nn.BatchNorm1d(5), (4, 5), {0: "N"}, (2, 5), {"BatchNormalization"}),
    ("batchnorm2d", lambda: nn.BatchNorm2d(3), (2, 3, 4, 4), {0: "N"}, (3, 3, 4, 4), {"BatchNormalization"}),
    ("layernorm", lambda: nn.LayerNorm(6), (2, 3, 6), {0: "N", 1: "T"}, (1, 5, 6), {"LayerNormalization"}),
    ("layernorm-2d", lambda: nn.LayerNorm((3, 6)), (2, 3, 6), {0: "N"}, (4, 3, 6), {"LayerNormalization"}),
    ("groupnorm", lambda: nn.GroupNorm(2, 4), (2, 4, 5, 5), {0: "N", 2: "H"}, (3, 4, 2, 5), {"ReduceMean"}),
    ("upsample-nearest", lambda: nn.Upsample(scale_factor=2), (2, 3, 4, 5), {0: "N"}, (1, 3, 4, 5), {"Resize"}),
    (
        "upsample-bilinear",
        lambda: nn.Upsample(scale_factor=(2, 3), mode="bilinear", align_corners=True),
        (2, 3, 4, 5),
        {0: "N"},
        (1, 3, 4, 5),
        {"Resize"},
    ),
    (
        "upsample-bicubic",
        lambda: nn.Upsample(size=(7, 9), mode="bicubic"),
        (2, 3, 4, 5),
        {0: "N"},
        (3, 3, 4, 5),
        {"Resize"},
    ),
    ("dropout", lambda: nn.Dropout(0.5), (4, 6), {0: "N"}, (2, 6), set()),
    ("relu", lambda: nn.ReLU(), (4, 6), {0: "N"}, (2, 6), {"Relu"}),
    ("gelu", lambda: nn.GELU(), (4, 6), {0: "N"}, (2, 6), {"Erf"}),
    ("gelu-tanh", lambda: nn.GELU(approximate="tanh"), (4, 6), {0: "N"}, (2, 6), {"Tanh"}),
    ("tanh", lambda: nn.Tanh(), (4, 6), {0: "N"}, (2, 6), {"Tanh"}),
    ("sigmoid", lambda: nn.Sigmoid(), (4, 6), {0: "N"}, (2, 6), {"Sigmoid"}),
    ("silu", lambda: nn.SiLU(), (4, 6), {0: "N"}, (2, 6), {"Sigmoid", "Mul"}),
    ("leaky-relu", lambda: nn.LeakyReLU(0.2), (4, 6), {0: "N"}, (2, 6), {"LeakyRelu"}),
    ("softmax", lambda: nn.Softmax(dim=-1), (4, 6), {0: "N"}, (2, 6), {"Softmax"}),
    ("log-softmax", lambda: nn.LogSoftmax(dim=1), (4, 6), {0: "N"}, (2, 6), {"LogSoftmax"}),
    ("flatten", lambda: nn.Flatten(), (2, 3, 4, 5), {0: "N"}, (3, 3, 4, 5), {"Reshape"}),
    ("flatten-middle", lambda: nn.Flatten(1, 2), (2, 3, 4, 5), {0: "N", 3: "W"}, (3, 3, 4, 2), {"Reshape"}),
]


@pytest.mark.parametrize("make,shape,axes,other,expected", [row[1:] for row in LAYERS], ids=[r[0] for r in LAYERS])
def test_layer_runs_in_onnxruntime_at_the_traced_and_another_size(tmp_path, make, shape, axes, other, expected):
    trainkit.manual_seed(0)
    model = make()
    if isinstance(model, (nn.BatchNorm1d, nn.BatchNorm2d)):  # running statistics other than 0 and 1
        model.train()
        with trainkit.no_grad():
            for _ in range(3):
                model(trainkit.randn(*shape) * 2 + 1)
    proto = roundtrip(tmp_path, model, (trainkit.randn(*shape),), ["x"], {"x": axes}, [(trainkit.randn(*other),)])
    assert expected <= ops_of(proto)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims if d.dim_param] == list(axes.values())


def test_embedding_is_a_gather_of_int64_ids(tmp_path):
    model = nn.Embedding(10, 4, padding_idx=0)
    ids = trainkit.tensor([[1, 2, 0], [9, 3, 3]])
    proto = roundtrip(tmp_path, model, (ids,), ["ids"], {"ids": [0, 1]}, [(trainkit.tensor([[4, 5, 6, 7, 8]]),)])
    assert "Gather" in ops_of(proto)
    assert proto.graph.initializer[0].name == "weight"


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_recurrent_layers_become_the_onnx_op_with_pytorchs_gates(tmp_path, kind, batch_first):
    trainkit.manual_seed(1)
    model = getattr(nn, kind)(4, 5, num_layers=2, bidirectional=True, batch_first=batch_first)
    axes = {0: "a", 1: "b"}
    proto = roundtrip(
        tmp_path, model, (trainkit.randn(3, 6, 4),), ["x"], {"x": axes}, [(trainkit.randn(7, 2, 4),)], atol=1e-5
    )
    assert kind in ops_of(proto)
    names = {i.name for i in proto.graph.initializer}
    assert {"weight_ih_l0", "weight_hh_l1_reverse"} <= names  # the parameters keep PyTorch's names


def test_lstm_with_initial_states_and_the_relu_rnn(tmp_path):
    model = nn.LSTM(3, 4, num_layers=2)
    h0, c0 = trainkit.randn(2, 2, 4), trainkit.randn(2, 2, 4)

    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = model

        def forward(self, x, h, c):
            return self.lstm(x, (h, c))

    roundtrip(tmp_path, WithState(), (trainkit.randn(5, 2, 3), h0, c0), ["x", "h", "c"])
    roundtrip(tmp_path, nn.RNN(3, 4, nonlinearity="relu"), (trainkit.randn(5, 3),), ["x"])  # unbatched


def test_multihead_attention_with_weights_and_a_key_padding_mask(tmp_path):
    trainkit.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)

    class Attend(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x, pad):
            return self.mha(x, x, x, key_padding_mask=pad)

    x = trainkit.randn(2, 5, 8)
    pad = trainkit.tensor([[False] * 4 + [True], [False] * 5])
    roundtrip(tmp_path, Attend(), (x, pad), ["x", "pad"])
    roundtrip(tmp_path, mha, (x, x, x), ["q", "k", "v"], atol=1e-5)


class TensorOps(nn.Module):
    """The tensor ops models use in forward, each an output of its own."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(trainkit.randn(6, 5))
        self.register_buffer("idx", trainkit.tensor([2, 0, 1]))

    def forward(self, x):
        B, T, C = x.shape
        u, v = trainkit.stack([x, x * 2], dim=1).unbind(1)
        values, indices = x.max(dim=-1)
        gathered = x[:, :, self.idx] + x.permute(0, 2, 1)[:, :3, :].transpose(1, 2)
        spread = (x.sum(1, keepdim=True).expand(B, T, C) - x.amax(-1, keepdim=True)).clamp(-1, 1) ** 2
        chosen = trainkit.where(x > 0, x.abs().sqrt(), (x.exp() + 1).log())
        arithmetic = 1 - x / (x.abs() + 1) - (-x)
        scores = trainkit.bmm(x, x.transpose(1, 2)).softmax(-1) + (x @ x.transpose(1, 2)).log_softmax(-1)
        linear = F.linear(x, self.w.t()[:, :C], None)
        gates = x.sigmoid() * x.tanh() * F.silu(x)
        return (
            u + v,
            values,
            indices,
            x.argmin(1),
            gathered,
            spread,
            chosen,
            arithmetic,
            scores,
            x.cumsum(1),
            linear,
            gates,
            x.mean((1, 2)),
            x[:, -1],
            x[..., None, 1:3],
            x.min(),
        )


class Call(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


FUNCTIONS = {
    "hardswish": F.hardswish,
    "mish": F.mish,
    "elu": lambda x: F.elu(x, 0.5),
    "softplus": lambda x: F.softplus(x, beta=2, threshold=5),
    "prelu": lambda x: F.prelu(x, trainkit.tensor([0.2, 0.1, 0.3, 0.4])),
    "trigonometric": lambda x: x.sin() + x.cos() + (x * 0.3).tan() + x.atan() + x.sinh() + x.cosh() + x.erf(),
    "rounding": lambda x: x.floor() + (x * 3).ceil() + (x * 3).round() + x.sign(),
    "division": lambda x: trainkit.div(x, 0.3, rounding_mode="floor") + trainkit.div(x, 0.3, rounding_mode="trunc"),
    "powers": lambda x: x.abs() ** x + 2**x + x.exp2() + x.square() + (x.abs() + 1).log2() + (x.abs() + 1).log10(),
    "alpha": lambda x: trainkit.sub(x, x * 2, alpha=3) + trainkit.add(x, x * 2, alpha=0.5) + 2 / (x.abs() + 1),
    "clamp": lambda x: x.clamp(min=0.1) + x.clamp(max=0.1) + x.clamp(min=-x.abs() / 2) + trainkit.maximum(x, -x),
    "reductions": lambda x: (x.logsumexp(-1), x.var(-1), x.std(0, keepdim=True), x.prod(-1), x.sum(), x.norm(dim=-1)),
    "normalize": lambda x: F.normalize(x, dim=-1) + F.normalize(x, p=1.5, dim=0),
    "rearrange": lambda x: (x.repeat(2, 1, 1), x.flip(0), x.roll(1, 0), x.index_select(1, trainkit.tensor([0, 2]))),
    "sorting": lambda x: (x.sort(0, descending=True), x.argsort(-1), x.topk(2), x.topk(2, dim=0, largest=False)),
}


class Functional(nn.Module):
    """Convolution and normalization called as functions rather than through their layers."""

    def __init__(self):
        super().__init__()
        self.w, self.w1 = nn.Parameter(trainkit.randn(4, 3, 3, 3)), nn.Parameter(trainkit.randn(4, 3, 3))
        self.b = nn.Parameter(trainkit.randn(4))
        self.register_buffer("mean", trainkit.randn(3))
        self.register_buffer("var", trainkit.rand(3) + 0.5)

    def forward(self, x):
        return (
            F.conv2d(x, self.w, self.b, stride=2, padding=1),
            F.conv2d(x, self.w, None, padding="same", dilation=2),
            F.conv1d(x[:, :, 0], self.w1, self.b, stride=2, padding=2),
            F.batch_norm(x, self.mean, self.var, self.b[:3], None),
            F.group_norm(x, 3, self.b[:3], self.b[:3]) + F.group_norm(x, 1),
        )


def test_functional_convolution_and_normalization(tmp_path):
    x, other = trainkit.randn(2, 3, 7, 7), trainkit.randn(3, 3, 9, 8)
    roundtrip(tmp_path, Functional(), (x,), ["x"], {"x": {0: "B", 2: "H", 3: "W"}}, [(other,)])


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_functions(tmp_path, name):
    trainkit.manual_seed(10)
    x = trainkit.randn(3, 4)
    roundtrip(tmp_path, Call(FUNCTIONS[name]), (x,), ["x"], {"x": [0]}, [(trainkit.randn(5, 4),)])


def test_tensor_ops_in_forward(tmp_path):
    trainkit.manual_seed(9)
    x = trainkit.randn(2, 4, 5)
    roundtrip(tmp_path, TensorOps(), (x,), ["x"], {"x": {0: "B", 1: "T"}}, [(trainkit.randn(3, 7, 5),)])


class InPlace(nn.Module):
    """In-place ops, which change a tensor's storage with no new tensor: each is the tensor's next value."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x, mask):
        y = self.lin(x)
        y += 1
        y.relu_()
        y[:, 0] = 0
        y[:, 2:] = y[:, 2:] * 2
        y[mask] = -1.0
        y[:, 1:5:2] = y[:, :1] * 3
        y.mul_(2).add_(x.sum(-1, keepdim=True), alpha=0.5)
        y.masked_fill_(y > 3, 3.0)
        y[0] = x[0, :1]
        z = x + trainkit.arange(4)
        z -= 1
        return y, z


def test_recurrent_cells_in_a_python_loop(tmp_path):
    """LSTMCell, GRUCell and RNNCell traced op by op, in a loop over a length that stays fixed (a loop over a
    dynamic axis is refused, since the traced graph holds the loop unrolled)."""

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.gru, self.rnn = nn.LSTMCell(2, 5), nn.GRUCell(5, 5), nn.RNNCell(5, 3, nonlinearity="relu")

        def forward(self, x):
            h = c = trainkit.zeros(x.size(0), 5, dtype=x.dtype)
            outs = []
            for step in x.split(1, dim=1):
                h, c = self.lstm(step.squeeze(1), (h, c))
                outs.append(self.rnn(self.gru(h)))
            return trainkit.stack(outs, 1)

    x = trainkit.randn(3, 4, 2, dtype=trainkit.float64)
    model = Loop().double()  # float64 end to end
    roundtrip(tmp_path, model, (x,), ["x"], {"x": {0: "B"}}, [(trainkit.randn(2, 4, 2, dtype=trainkit.float64),)])
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"for t in range\(T\)"):
        trainkit.onnx.export(model, (x,), None, dynamic_axes={"x": {0: "B", 1: "T"}})


def test_in_place_ops(tmp_path):
    args = (trainkit.randn(3, 4), trainkit.randn(3, 6) > 0.5)
    other = (trainkit.randn(5, 4), trainkit.randn(5, 6) > 0)
    roundtrip(tmp_path, InPlace(), args, ["x", "mask"], {"x": {0: "B"}, "mask": {0: "B"}}, [other])

    class ThroughAView(nn.Module):
        def forward(self, x):
            y = x * 2
            y[:, 1:] *= 2  # multiplies a view of y, then writes it back
            return y

    with pytest.raises(trainkit.onnx.OnnxExporterError, match="changed in place by"):
        trainkit.onnx.export(ThroughAView(), (trainkit.randn(2, 3),), None)


def test_comparisons_masks_and_padding_follow_the_inputs(tmp_path):
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 6, padding_idx=0)

        def forward(self, ids):
            pad = (ids == 0) | (ids > 10)
            x = self.emb(ids).masked_fill(pad.unsqueeze(-1), -1.0)
            x = F.pad(x, (1, 2), value=0.5) * (x.abs() + 1).rsqrt().mean(-1, keepdim=True)
            return x.sum(1) / (~pad).float().sum(1, keepdim=True), x.amax(-1) >= 0

    ids = trainkit.tensor([[0, 3, 11, 5], [4, 4, 0, 0]])
    others = [(trainkit.tensor([[1, 0, 2, 0, 7, 11]]),)]
    proto = roundtrip(tmp_path, Masked(), (ids,), ["ids"], {"ids": {0: "B", 1: "T"}}, others)
    assert {"Equal", "Greater", "Or", "Not", "Pad", "Where"} <= ops_of(proto)


def test_transformer_encoder_with_a_key_padding_mask_input(tmp_path):
    trainkit.manual_seed(8)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)

    class Encode(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = model

        def forward(self, x, pad):
            return self.encoder(x, src_key_padding_mask=pad)

    pad = trainkit.tensor([[False, False, True], [False, False, False]])
    other = (trainkit.randn(3, 5, 8), trainkit.tensor([[False] * 5, [False] * 2 + [True] * 3, [False] * 4 + [True]]))
    dynamic = {"x": {0: "B", 1: "T"}, "pad": {0: "B", 1: "T"}}
    roundtrip(tmp_path, Encode(), (trainkit.randn(2, 3, 8), pad), ["x", "pad"], dynamic, [other])


# ------------------------------------------------------------------------------------------------------ models
class GPTBlock(nn.Module):
    """A GPT block as nanoGPT writes it: causal attention through scaled_dot_product_attention, then an MLP."""

    def __init__(self, d: int = 16, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 20, d: int = 16, block: int = 12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(trainkit.randn(1, block, d) * 0.1)
        self.blocks = nn.Sequential(GPTBlock(d), GPTBlock(d))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos[:, :T, :]
        return self.head(self.ln(self.blocks(x)))


def test_mlp_and_cnn(tmp_path):
    trainkit.manual_seed(3)
    mlp = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3), nn.LogSoftmax(dim=1))
    roundtrip(tmp_path, mlp, (trainkit.randn(4, 6),), ["x"], {"x": {0: "batch"}}, [(trainkit.randn(9, 6),)])
    cnn = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )
    x = trainkit.randn(2, 1, 8, 8)
    proto = roundtrip(tmp_path, cnn, (x,), ["image"], {"image": {0: "batch"}}, [(trainkit.randn(5, 1, 8, 8),)])
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_lstm_language_model(tmp_path):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(30, 8)
            self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True, dropout=0.1)
            self.out = nn.Linear(12, 30)

        def forward(self, ids):
            h, _ = self.lstm(self.emb(ids))
            return self.out(h)

    trainkit.manual_seed(4)
    ids = trainkit.randint(0, 30, (2, 7))
    roundtrip(tmp_path, LM(), (ids,), ["ids"], {"ids": {0: "batch", 1: "seq"}}, [(trainkit.randint(0, 30, (3, 4)),)])


def test_transformer_encoder(tmp_path):
    trainkit.manual_seed(5)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=True, activation="gelu")
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    x = trainkit.randn(2, 5, 16)
    proto = roundtrip(tmp_path, model, (x,), ["src"], {"src": {0: "B", 1: "S"}}, [(trainkit.randn(3, 9, 16),)])
    assert "LayerNormalization" in ops_of(proto)


def test_transformer_decoder_layer_with_a_causal_mask_input(tmp_path):
    trainkit.manual_seed(6)
    model = nn.TransformerDecoderLayer(16, 2, 24)  # sequence first
    tgt, memory = trainkit.randn(4, 2, 16), trainkit.randn(6, 2, 16)
    mask = nn.Transformer.generate_square_subsequent_mask(4)

    class Decode(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = model

        def forward(self, tgt, memory, mask):
            return self.layer(tgt, memory, tgt_mask=mask)

    roundtrip(tmp_path, Decode(), (tgt, memory, mask), ["tgt", "memory", "mask"])


def test_nanogpt_style_positions_from_arange(tmp_path):
    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(20, 16), nn.Embedding(12, 16)
            self.block = GPTBlock(16)
            self.lm_head = nn.Linear(16, 20, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as nanoGPT ties them

        def forward(self, idx):
            b, t = idx.size()
            pos = trainkit.arange(0, t, dtype=trainkit.long, device=idx.device)
            return self.lm_head(self.block(self.wte(idx) + self.wpe(pos)))[:, [-1], :]

    trainkit.manual_seed(11)
    ids = trainkit.randint(0, 20, (2, 5))
    dynamic = {"idx": {0: "batch", 1: "seq"}}
    roundtrip(tmp_path, TinyGPT(), (ids,), ["idx"], dynamic, [(trainkit.randint(0, 20, (1, 12)),)])


def test_encoder_decoder_transformer_with_the_causal_mask_made_in_forward(tmp_path):
    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = nn.Transformer(16, 2, 1, 1, 32, batch_first=True)

        def forward(self, src, tgt):
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])  # -inf above the diagonal
            return self.t(src, tgt, tgt_mask=mask, tgt_is_causal=True)

    args = (trainkit.randn(2, 5, 16), trainkit.randn(2, 4, 16))
    dynamic = {"src": {0: "B", 1: "S"}, "tgt": {0: "B", 1: "T"}}
    other = (trainkit.randn(3, 7, 16), trainkit.randn(3, 2, 16))
    roundtrip(tmp_path, Seq2Seq(), args, ["src", "tgt"], dynamic, [other])


def test_gpt_with_dynamic_batch_and_sequence_length(tmp_path):
    trainkit.manual_seed(7)
    model = GPT()
    ids = trainkit.randint(0, 20, (2, 6))
    others = [(trainkit.randint(0, 20, (1, 12)),), (trainkit.randint(0, 20, (3, 3)),)]
    dynamic = {"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    model.eval()
    path = tmp_path / "gpt.onnx"
    trainkit.onnx.export(model, (ids,), str(path), input_names=["idx"], output_names=["logits"], dynamic_axes=dynamic)
    sess = session(path)
    for (x,) in [(ids,), *others]:
        (got,) = sess.run(["logits"], {"idx": x.numpy()})
        np.testing.assert_allclose(got, outputs_of(model, (x,))[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("which", ["gpt", "lstm", "encoder"])
def test_traced_at_batch_and_length_one(tmp_path, which):
    """Exported as usual from one example of length one: the copies `.contiguous()` skips there, and views that are
    copies at other sizes, do not get in the way."""
    trainkit.manual_seed(12)
    model, x, other = {
        "gpt": (GPT(), trainkit.randint(0, 20, (1, 1)), trainkit.randint(0, 20, (3, 7))),
        "lstm": (nn.LSTM(4, 5, batch_first=True, num_layers=2), trainkit.randn(1, 1, 4), trainkit.randn(3, 6, 4)),
        "encoder": (
            nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
            trainkit.randn(1, 1, 8),
            trainkit.randn(2, 5, 8),
        ),
    }[which]
    roundtrip(tmp_path, model, (x,), ["x"], {"x": {0: "batch", 1: "seq"}}, [(other,)])


# ------------------------------------------------------------------------------------------------ the arguments
def test_file_object_opsets_and_export_params(tmp_path):
    trainkit.manual_seed(13)
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.LayerNorm(4))
    x = trainkit.randn(2, 3)
    buf = io.BytesIO()
    program = trainkit.onnx.export(model, (x,), buf, input_names=["x"], output_names=["y"])
    proto = onnx.load_from_string(buf.getvalue())
    assert proto.opset_import[0].version == 18 == program.model_proto.opset_import[0].version
    assert [o.name for o in proto.graph.output] == ["y"]
    got = session(buf.getvalue()).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, outputs_of(model, (x,))[0], rtol=1e-4, atol=1e-5)
    for opset in (17, 20, 21):
        proto = roundtrip(tmp_path, model, (x,), ["x"], opset_version=opset)
        assert ("Gelu" in ops_of(proto)) == (opset >= 20)
    proto = roundtrip(tmp_path, nn.Sequential(nn.Linear(3, 4), nn.Softmax(-1)), (x,), ["x"], opset_version=13)
    buf = io.BytesIO()
    trainkit.onnx.export(model, x, buf, export_params=False)  # a lone tensor is the one argument
    proto = onnx.load_from_string(buf.getvalue())
    assert not proto.graph.initializer or all(i.name.startswith("const") for i in proto.graph.initializer)
    assert [i.name for i in proto.graph.input] == ["input", "0.weight", "0.bias", "2.weight", "2.bias"]


@pytest.mark.parametrize("opset", [13, 16, 21])
def test_older_and_newer_opsets(tmp_path, opset):
    """LayerNorm before opset 17, GELU before 20, HardSwish before 14 and triu/tril before 14 are written from
    older ops; the models give the same outputs at every opset."""
    ids = trainkit.randint(0, 20, (2, 5))
    roundtrip(
        tmp_path,
        GPT(),
        (ids,),
        ["idx"],
        {"idx": {0: "B", 1: "T"}},
        [(trainkit.randint(0, 20, (1, 9)),)],
        opset_version=opset,
    )
    triangles = Call(lambda x: F.hardswish(x).triu(1) + x.tril(-1) * 2 + F.layer_norm(x, (4,)).tril())
    x = trainkit.randn(2, 3, 4)
    proto = roundtrip(
        tmp_path, triangles, (x,), ["x"], {"x": [0, 1]}, [(trainkit.randn(1, 6, 4),)], opset_version=opset
    )
    assert proto.opset_import[0].version == opset
    assert ("Trilu" in ops_of(proto)) == (opset >= 14) and ("LayerNormalization" in ops_of(proto)) == (opset >= 17)


def test_the_program_runs_and_verify_checks_it():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    program = trainkit.onnx.export(model, (trainkit.randn(2, 3),), None, dynamic_axes={"input": [0]}, verify=True)
    x = trainkit.randn(5, 3)
    (y,) = program(x)
    assert isinstance(y, trainkit.Tensor) and y.dtype == trainkit.float32
    np.testing.assert_allclose(y.numpy(), outputs_of(model, (x,))[0], rtol=1e-5, atol=1e-6)
    program.optimize()
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"0 tensors given for the inputs \['input'\]"):
        program()


def test_model_stays_in_its_mode_and_export_returns_a_program(tmp_path):
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    model.train()
    program = trainkit.onnx.export(model, (trainkit.randn(1, 3),), None)
    assert model.training and model[1].training
    assert "ONNXProgram" in repr(program)
    program.save(tmp_path / "saved.onnx")
    onnx.checker.check_model(str(tmp_path / "saved.onnx"))
    assert trainkit.onnx.is_in_onnx_export() is False


def test_pytorch_switches(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    x = trainkit.randn(2, 3)
    proto = roundtrip(
        tmp_path,
        model,
        (x,),
        ["x"],
        keep_initializers_as_inputs=True,
        training=trainkit.onnx.TrainingMode.EVAL,
        dynamo=False,
        do_constant_folding=False,
        external_data=False,
    )
    assert {"0.weight", "1.running_mean"} <= {i.name for i in proto.graph.input}
    model.train()
    with pytest.raises(trainkit.onnx.OnnxExporterError, match="training=TrainingMode.TRAINING"):
        trainkit.onnx.export(model, (x,), None, training=trainkit.onnx.TrainingMode.PRESERVE)
    with pytest.raises(trainkit.onnx.OnnxExporterError, match="custom_translation_table"):
        trainkit.onnx.export(model, (x,), None, custom_translation_table={abs: abs})


# ------------------------------------------------------------------------------------------------------ refusals
def test_an_op_without_converter_names_the_op_and_the_module(tmp_path):
    class Products(nn.Module):
        def forward(self, x):
            return x.cumprod(dim=-1)

    model = nn.Sequential(nn.Linear(3, 3), nn.Sequential(nn.ReLU(), Products()))
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"op CumprodBackward0 .*in module '1.1'"):
        trainkit.onnx.export(model, (trainkit.randn(2, 3),), tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_without_the_onnx_package_export_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if it were not installed
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"needs the onnx package: pip install onnx"):
        trainkit.onnx.export(nn.Linear(2, 2), (trainkit.ones(1, 2),), None)


def test_refusals_name_the_culprit(tmp_path):
    x = trainkit.randn(2, 3)
    with pytest.raises(trainkit.onnx.OnnxExporterError, match="opset_version=9"):
        trainkit.onnx.export(nn.Linear(3, 3), (x,), tmp_path / "m.onnx", opset_version=9)
    with pytest.raises(trainkit.onnx.OnnxExporterError, match="input_names has 2 names for 1"):
        trainkit.onnx.export(nn.Linear(3, 3), (x,), tmp_path / "m.onnx", input_names=["a", "b"])
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"dynamic_axes\['x'\] names axis 2, but the input"):
        trainkit.onnx.export(nn.Linear(3, 3), (x,), None, input_names=["x"], dynamic_axes={"x": [0, 2]})
    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"dynamic_axes\['y'\] names axis 3, but the output"):
        trainkit.onnx.export(nn.Linear(3, 3), (x,), None, output_names=["y"], dynamic_axes={"y": {3: "n"}})
    with pytest.warns(UserWarning, match="Provided key z for dynamic axes is not a valid input/output name"):
        trainkit.onnx.export(nn.Linear(3, 3), (x,), None, dynamic_axes={"z": [0]})
    with pytest.raises(trainkit.onnx.OnnxExporterError, match="model must be a Module"):
        trainkit.onnx.export(lambda t: t, (x,), tmp_path / "m.onnx")

    class Mask(nn.Module):
        def forward(self, x):
            T = x.shape[1]
            return x.masked_fill(trainkit.ones(T, T).triu(1).bool(), 0.0)

    # a tensor of one value (ones, zeros_like) follows the axes; the triangle is then an op on it
    dynamic = {"x": {1: "T", 2: "T"}}
    roundtrip(tmp_path, Mask(), (trainkit.randn(2, 4, 4),), ["x"], dynamic, [(trainkit.randn(2, 7, 7),)])

    class Positions(nn.Module):
        def forward(self, x):
            return x + trainkit.arange(x.shape[1]) + trainkit.arange(3, 3 + 2 * x.shape[1], 2)

    roundtrip(tmp_path, Positions(), (trainkit.randn(2, 4),), ["x"], {"x": [1]}, [(trainkit.randn(2, 9),)])

    class Squeezes(nn.Module):
        def forward(self, x):
            return x.squeeze()

    with pytest.raises(trainkit.onnx.OnnxExporterError, match=r"has \[1\] dimensions at the traced sizes and \[2\]"):
        trainkit.onnx.export(Squeezes(), (trainkit.randn(1, 4),), None, dynamic_axes={"x": [0]})

    class Spaced(nn.Module):
        def forward(self, x):
            return x + trainkit.linspace(0, 1, x.shape[1])

    with pytest.raises(trainkit.onnx.OnnxExporterError, match="made inside forward whose size follows a dynamic"):
        trainkit.onnx.export(Spaced(), (trainkit.randn(2, 4),), tmp_path / "m.onnx", dynamic_axes={"x": [1]})
    roundtrip(tmp_path, Spaced(), (trainkit.randn(2, 4),), ["x"])  # at a fixed size it is a constant

    class Untraced(nn.Module):
        def forward(self, x):
            return x + trainkit.from_numpy(x.numpy() * 2)  # through NumPy: nothing is recorded

    with pytest.raises(trainkit.onnx.OnnxExporterError, match="changes with the inputs' values"):
        trainkit.onnx.export(Untraced(), (trainkit.randn(2, 3),), tmp_path / "m.onnx")

    class Branches(nn.Module):
        def forward(self, x):
            return x.relu() if x.shape[0] <= 2 else x.tanh().tanh()

    with pytest.raises(trainkit.onnx.OnnxExporterError, match="branches or loops on their sizes or values"):
        trainkit.onnx.export(Branches(), (trainkit.ones(2, 3),), tmp_path / "m.onnx", dynamic_axes={"x": [0]})


def test_verbose_prints_the_nodes_and_forward_sees_the_export(tmp_path, capsys):
    seen = []

    class Looks(nn.Module):
        def forward(self, x):
            seen.append(trainkit.onnx.is_in_onnx_export())
            return x.relu()

    trainkit.onnx.export(Looks(), (trainkit.randn(2, 3),), tmp_path / "m.onnx", verbose=True)
    assert seen and all(seen) and not trainkit.onnx.is_in_onnx_export()
    assert "Relu(x)" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------- the launcher
SCRIPT = """
import torch
import torch.onnx
import onnxruntime

model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
model.eval()
torch.onnx.export(model, (torch.randn(1, 3),), "model.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
x = torch.randn(5, 3)
(y,) = onnxruntime.InferenceSession("model.onnx").run(None, {"x": x.numpy()})
with torch.no_grad():
    print("max difference", float(abs(y - model(x).numpy()).max()), y.shape)
"""


def test_torch_onnx_export_through_run_torch(tmp_path):
    script = tmp_path / "export.py"
    script.write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "run-torch", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    difference = float(result.stdout.split()[2])
    assert difference < 1e-5 and "(5, 2)" in result.stdout
    assert (tmp_path / "model.onnx").exists()


CHECK_WORD_LANGUAGE_MODEL = """
import numpy as np
import onnxruntime
import torch

import model  # noqa: F401  (the classes model.pt names)

with open("model.pt", "rb") as f:
    net = torch.load(f, weights_only=False)
net.eval()
session = onnxruntime.InferenceSession("model.onnx")
x = torch.randint(0, 10, (8, 1))
hidden = net.init_hidden(1)
feeds = dict(zip([i.name for i in session.get_inputs()], [x.numpy()] + [h.numpy() for h in hidden]))
with torch.no_grad():
    out, (h, c) = net(x, hidden)
got = session.run(None, feeds)
print("max difference", max(float(abs(g - w.numpy()).max()) for g, w in zip(got, (out, h, c))))
"""


def test_pytorch_examples_word_language_model_exports_its_lstm(tmp_path):
    """pytorch/examples' word_language_model/main.py, unmodified, with --onnx-export: the file it writes runs in
    onnxruntime and gives the saved model's outputs."""
    program = tmp_path / "word_language_model"
    shutil.copytree(ROOT / "tests" / "real_programs" / "word_language_model", program)
    (program / "check.py").write_text(textwrap.dedent(CHECK_WORD_LANGUAGE_MODEL))
    args = ["--data", "data/tiny", "--model", "LSTM", "--epochs", "1", "--emsize", "16", "--nhid", "16"]
    args += ["--bptt", "8", "--batch_size", "4", "--dry-run", "--onnx-export", "model.onnx", "--save", "model.pt"]
    for script, extra in (("main.py", args), ("check.py", [])):
        result = subprocess.run(
            [sys.executable, "-m", "trainkit.cli", "run-torch", script, *extra],
            capture_output=True,
            text=True,
            cwd=program,
            timeout=120,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 0, result.stderr
    assert float(result.stdout.split()[-1]) < 1e-5


EXPORT_GPTS = """
import sys

import numpy as np
import onnxruntime
import torch

sys.path[:0] = ["nanogpt", "mingpt"]
import model as nanogpt  # noqa: E402
from mingpt.model import GPT as MinGPT  # noqa: E402

torch.manual_seed(0)
nano = nanogpt.GPT(nanogpt.GPTConfig(block_size=32, vocab_size=50, n_layer=2, n_head=2, n_embd=16, dropout=0.0))
config = MinGPT.get_default_config()
config.model_type, config.n_layer, config.n_head, config.n_embd = None, 2, 2, 16
config.vocab_size, config.block_size = 50, 32
for name, net in (("nanogpt", nano), ("mingpt", MinGPT(config))):
    net.eval()
    torch.onnx.export(net, (torch.randint(0, 50, (2, 10)),), name + ".onnx", input_names=["idx"],
                      dynamic_axes={"idx": {0: "batch", 1: "length"}})
    session = onnxruntime.InferenceSession(name + ".onnx")
    for shape in ((3, 32), (1, 1)):
        idx = torch.randint(0, 50, shape)
        with torch.no_grad():
            logits, _ = net(idx)
        (got,) = session.run(None, {"idx": idx.numpy()})
        print(name, shape, float(abs(got - logits.numpy()).max()))
"""


def test_nanogpt_and_mingpt_export_unmodified(tmp_path):
    """The GPT classes of nanoGPT and minGPT, as their authors wrote them, exported through torch.onnx.export with
    a dynamic batch and length: onnxruntime gives their logits at other sizes."""
    for name in ("nanogpt", "mingpt"):
        shutil.copytree(ROOT / "tests" / "real_programs" / name, tmp_path / name)
    (tmp_path / "export.py").write_text(textwrap.dedent(EXPORT_GPTS))
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "run-torch", "export.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines() if line.startswith(("nanogpt", "mingpt"))]
    assert len(lines) == 4 and all(float(line[-1]) < 1e-5 for line in lines), result.stdout
