"""``summary`` on models that take token ids: an input that reaches an Embedding becomes integer zeros by itself;
``dtypes=`` (torchinfo's), ``dtype=``, ``input_size=`` and ``input_data=`` choose the inputs; a model that needs
integers summary cannot see says how to pass them. Output shapes and parameter counts are compared with PyTorch."""

from __future__ import annotations

import re

import pytest

import trainkit
from trainkit import nn


def language_models(lib):
    """The same models in trainkit and in torch (``lib`` is either)."""

    class Tagger(lib.nn.Module):
        """Embedding -> LSTM -> Linear, on every step."""

        def __init__(self):
            super().__init__()
            self.embed = lib.nn.Embedding(50, 8, padding_idx=0)
            self.lstm = lib.nn.LSTM(8, 16, batch_first=True)
            self.head = lib.nn.Linear(16, 5)

        def forward(self, ids):
            out, _ = self.lstm(self.embed(ids))
            return self.head(out)

    class Encoder(lib.nn.Module):
        """Embedding -> TransformerEncoder -> Linear on the mean over the sequence, with a padding mask."""

        def __init__(self):
            super().__init__()
            self.embed = lib.nn.Embedding(40, 16)
            layer = lib.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
            self.encoder = lib.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = lib.nn.Linear(16, 3)

        def forward(self, ids):
            return self.head(self.encoder(self.embed(ids), src_key_padding_mask=ids == 39).mean(1))

    class Translator(lib.nn.Module):
        """Two inputs, each through its own Embedding, into an encoder-decoder Transformer."""

        def __init__(self):
            super().__init__()
            self.src = lib.nn.Embedding(30, 8)
            self.tgt = lib.nn.Embedding(20, 8)
            self.transformer = lib.nn.Transformer(8, 2, 1, 1, dim_feedforward=16, dropout=0.0, batch_first=True)
            self.head = lib.nn.Linear(8, 20)

        def forward(self, src, tgt):
            return self.head(self.transformer(self.src(src), self.tgt(tgt)))

    return {"tagger": Tagger, "encoder": Encoder, "translator": Translator}


def torch_shapes(torch, model, inputs) -> dict:
    """Each leaf layer's output shapes in torch, as summary writes them."""
    shapes = {}

    def shape_of(o):
        if isinstance(o, torch.Tensor):
            return str(list(o.shape))
        return ", ".join(shape_of(x) for x in o)

    def hook(module, args, output, name):
        shapes.setdefault(name, shape_of(output))  # returns None: a hook's returned value replaces the output

    handles = [
        m.register_forward_hook(lambda m, a, o, n=n: hook(m, a, o, n))
        for n, m in model.named_modules()
        if not list(m.children())
    ]
    model.eval()
    with torch.no_grad():
        model(*inputs)
    for h in handles:
        h.remove()
    return shapes


def rows(table: str) -> dict:
    """``name -> (output shapes, params)`` from the table's rows."""
    out = {}
    for line in table.splitlines():
        m = re.match(r"(\S+) \((\w+)\)\s+(.+?)\s+([\d,]+)$", line)
        if m:
            out[m.group(1)] = (m.group(3), int(m.group(4).replace(",", "")))
    return out


@pytest.mark.parametrize("name,shapes", [("tagger", [(12,)]), ("encoder", [(10,)]), ("translator", [(7,), (5,)])])
def test_an_input_that_reaches_an_embedding_becomes_integer_zeros(torch, name, shapes):
    trainkit.manual_seed(0)
    model = language_models(trainkit)[name]()
    reference = language_models(torch)[name]()
    given = shapes if len(shapes) > 1 else shapes[0]
    table = nn.summary(model, given, batch_size=2, print_fn=None)
    assert table.splitlines()[-1] == "Input: " + ", ".join(f"int64 {[2, *s]}" for s in shapes)
    want = torch_shapes(torch, reference, [torch.zeros(2, *s, dtype=torch.long) for s in shapes])
    got = rows(table)
    assert {k: v[0] for k, v in got.items()} == want
    assert sum(v[1] for v in got.values()) <= sum(p.numel() for p in reference.parameters())
    assert f"Total params: {sum(p.numel() for p in reference.parameters()):,}" in table
    assert model.summary(given, batch_size=2, print_fn=None) == table


def test_torchinfo_style_dtypes_input_size_and_input_data():
    model = language_models(trainkit)["tagger"]()
    inferred = nn.summary(model, (12,), print_fn=None)
    assert nn.summary(model, (12,), dtypes=[trainkit.long], print_fn=None) == inferred
    assert nn.summary(model, input_size=(1, 12), dtypes=[trainkit.long], print_fn=None) == inferred
    assert nn.summary(model, (12,), dtype=trainkit.int64, print_fn=None) == inferred
    assert nn.summary(model, input_data=trainkit.zeros(1, 12, dtype=trainkit.long), print_fn=None) == inferred
    int32 = nn.summary(model, (12,), dtypes=[trainkit.int32], print_fn=None)
    assert int32.splitlines()[-1] == "Input: int32 [1, 12]"
    two = language_models(trainkit)["translator"]()
    table = nn.summary(two, input_size=[(3, 7), (3, 5)], dtypes=[trainkit.long, trainkit.long], print_fn=None)
    assert table.splitlines()[-1] == "Input: int64 [3, 7], int64 [3, 5]"


def test_float_models_keep_float32_inputs():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    assert nn.summary(model, (4,), print_fn=None).splitlines()[-1] == "Input: float32 [1, 4]"
    table = nn.summary(model.double(), (4,), dtype=trainkit.float64, print_fn=None)
    assert table.splitlines()[-1] == "Input: float64 [1, 4]"


class Lookup(nn.Module):
    """Indices used by hand (no Embedding module): summary cannot see that the input holds indices."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(trainkit.randn(10, 4))
        self.head = nn.Linear(4, 2)

    def forward(self, ids):
        return self.head(self.table[ids])


def test_a_model_that_needs_integers_summary_cannot_see_says_how_to_pass_them():
    model = Lookup()
    with pytest.raises(IndexError) as err:
        nn.summary(model, (6,), print_fn=None)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("summary(Lookup): its forward failed on zeros of float32 [1, 6]: ")
    assert "tensors used as indices must be" in message and "pass dtypes=[trainkit.long]" in message
    assert "input_data=" in message
    table = nn.summary(model, (6,), dtypes=[trainkit.long], print_fn=None)  # what the message says works
    assert "head (Linear)" in table and "[1, 6, 2]" in table
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert all(m.training for m in model.modules())


def test_an_embedding_fed_from_one_of_several_inputs_summary_cannot_pick():
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)

        def forward(self, a, b):
            return self.embed(a.squeeze(-1)) + b

    model = Mixed()
    with pytest.raises(TypeError, match=r"summary\(Mixed\): embed \(Embedding\) looks up indices, but summary cannot"):
        nn.summary(model, [(3, 1), (3, 4)], print_fn=None)
    table = nn.summary(model, [(3, 1), (3, 4)], dtypes=[trainkit.long, trainkit.float32], print_fn=None)
    assert table.splitlines()[-1] == "Input: int64 [1, 3, 1], float32 [1, 3, 4]"
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_a_shape_error_points_at_the_shape():
    with pytest.raises(RuntimeError) as err:
        nn.summary(nn.Sequential(nn.Linear(4, 3)), (5,), print_fn=None)
    assert str(err.value).startswith("summary(Sequential): its forward failed on zeros of float32 [1, 5]: ")
    assert "input_shape leaves out the batch dimension" in str(err.value) and "dtypes=[trainkit.long]" not in str(
        err.value
    )


def test_wrong_arguments_name_themselves():
    model = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(TypeError, match="dtype= .every input. or dtypes= .one per input., not both"):
        nn.summary(model, (4,), dtype=trainkit.float32, dtypes=[trainkit.float32], print_fn=None)
    with pytest.raises(ValueError, match=r"dtypes has 2 entries for 1 input\(s\)"):
        nn.summary(model, (4,), dtypes=[trainkit.float32, trainkit.long], print_fn=None)
    with pytest.raises(TypeError, match="takes the input's shape once"):
        nn.summary(model, print_fn=None)
    with pytest.raises(TypeError, match="takes the input's shape once"):
        nn.summary(model, (4,), input_size=(1, 4), print_fn=None)
    with pytest.raises(TypeError, match="input_data= or a shape"):
        nn.summary(model, (4,), input_data=trainkit.zeros(1, 4), print_fn=None)
