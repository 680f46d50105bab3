"""The monitoring tools on sequence models: the graph text, the explorer, the gradient and activation monitors and
TensorBoard's add_graph see a fused recurrent layer or attention as one node, with its saved tensors."""

from __future__ import annotations

import math

import pytest

import trainkit
from trainkit import nn, optim
from trainkit.autograd.explore import collect
from trainkit.autograd.graph import graph
from trainkit.callbacks import ActivationGradientMonitor, GradientMonitor
from trainkit.data import TensorDataset
from trainkit.trainer import Trainer


class Tagger(nn.Module):
    """Embedding -> a recurrent layer -> Linear, a token classifier over (N, T) ids."""

    def __init__(self, kind: str = "LSTM", bidirectional: bool = False):
        super().__init__()
        self.emb = nn.Embedding(12, 8)
        self.rnn = getattr(nn, kind)(8, 16, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 3)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.head(out).mean(1)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 16)
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.encoder(self.emb(x), is_causal=False).mean(1))


def _data(n: int = 24, t: int = 7):
    trainkit.manual_seed(0)
    return TensorDataset(trainkit.randint(0, 12, (n, t)), trainkit.randint(0, 3, (n,)))


@pytest.mark.parametrize(
    "kind,name", [("LSTM", "LstmLayerBackward0"), ("GRU", "GruLayerBackward0"), ("RNN", "RnnTanhLayerBackward0")]
)
def test_a_fused_layer_is_one_node_per_layer_and_direction_with_its_saved_tensors(kind, name):
    model = Tagger(kind, bidirectional=True)
    x, _ = _data(4).tensors
    loss = model(x).sum()
    g = graph(loss, dict(model.named_parameters()))
    layers = [n for n in g.nodes if n.name() == name]
    assert len(layers) == 4  # 2 layers x 2 directions
    text = g.text()
    assert text.count(name) == 4 and "rnn.weight_hh_l1_reverse" in text
    data = collect(loss, model)
    fused = [n for n in data["nodes"] if n["name"] == name]
    assert len(fused) == 4 and all(n["module"] == "rnn" for n in fused)
    assert all(n["saved"] and sum(s["bytes"] for s in n["saved"]) > 0 for n in fused)
    whats = {s["what"] for n in fused for s in n["saved"]}
    assert "output 0 of this node" in whats and "rnn.weight_hh_l0_reverse" in whats
    kept = any(w.endswith(", kept by this node") for w in whats)  # gates and cells kept for backward, named
    assert kept == (kind != "RNN")  # a plain RNN's backward needs its hidden states alone: its output
    assert data["totals"]["saved_by_module"]["rnn"] > 0
    loss.backward()
    assert all(n._saved is None for n in layers)  # freed as backward ran
    assert "freed" in graph(loss).text()


def test_attention_is_one_node_with_its_saved_tensors():
    model = Encoder()
    x, _ = _data(4).tensors
    loss = model(x).sum()
    data = collect(loss, model)
    attention = [n for n in data["nodes"] if "Attention" in n["name"]]
    assert len(attention) == 2  # one per encoder layer
    assert all(n["saved"] and sum(s["bytes"] for s in n["saved"]) > 0 for n in attention)
    assert all("the attention weights P, kept by this node" in [s["what"] for s in n["saved"]] for n in attention)
    projections = [n for n in data["nodes"] if n["module"] == "encoder.layers.0.self_attn"]
    assert projections  # the in-projection feeding it belongs to the attention module


@pytest.mark.parametrize(
    "make",
    [lambda: Tagger("LSTM"), lambda: Tagger("GRU", bidirectional=True), Encoder],
    ids=["lstm", "bigru", "transformer"],
)
def test_monitors_follow_a_sequence_model_through_fit(make):
    trainkit.manual_seed(0)
    model = make()
    watched = "rnn" if isinstance(model, Tagger) else "encoder.layers.0.self_attn"
    monitors = [GradientMonitor(), ActivationGradientMonitor([watched], verbose=False)]
    trainer = Trainer(
        model, optim.Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss(), callbacks=monitors, seed=0, verbose=False
    )
    history = trainer.fit(_data(), epochs=2, batch_size=8).history
    norms = history[f"act_grad_norm/{watched}"]
    assert len(norms) == 2 and all(math.isfinite(v) and v > 0 for v in norms)
    weight = "rnn.weight_hh_l1" if isinstance(model, Tagger) else "encoder.layers.1.self_attn.in_proj_weight"
    assert any(weight in key for key in history)  # the recurrent / attention weights are watched per parameter


def test_add_graph_of_an_lstm_model_names_the_fused_layer_in_its_scope(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from trainkit.utils.tensorboard import SummaryWriter

    model = Tagger("LSTM")
    x, _ = _data(4).tensors
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(model, x)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    names = [node.name for node in events.Graph().node]
    fused = [n for n in names if "LstmLayerBackward0" in n]
    assert len(fused) == 2 and all(n.startswith("Tagger/LSTM[rnn]/") for n in fused)
    assert "Tagger/LSTM[rnn]/weight_ih_l1" in names
