"""W6 and W7: a small GPT's training step and an LSTM language model's, in trainkit, PyTorch and hand-written NumPy.

Each model is written once against ``lib`` (``trainkit`` or ``torch``) and starts from PyTorch's seeded
initialisation, copied into the other implementations. W6 is a pre-norm GPT (attention through
``F.scaled_dot_product_attention(q, k, v, is_causal=True)``, head tied to the token embedding) trained with AdamW;
W7 is the model of PyTorch's word_language_model example without dropout (Embedding, 2-layer ``nn.LSTM``,
Linear decoder), its hidden state carried from step to step detached, trained with SGD after
``clip_grad_norm_(0.25)``.
"""

from __future__ import annotations

import numpy as np

import trainkit
from benchmarks import numpy_sequence

# W6: GPT
GPT_BATCH, GPT_CONTEXT, GPT_WIDTH, GPT_HEADS, GPT_LAYERS, GPT_VOCAB = 16, 64, 128, 4, 4, 96
GPT_LR = 1e-3
# W7: LSTM language model
LSTM_VOCAB, LSTM_EMBED, LSTM_HIDDEN, LSTM_LAYERS, LSTM_STEPS, LSTM_BATCH = 2000, 128, 256, 2, 35, 20
LSTM_LR, LSTM_CLIP = 20.0, 0.25


def _torch():
    import torch

    return torch


def _lib(impl: str):
    return _torch() if impl == "torch" else trainkit  # "compiled" is trainkit with its step compiled


def _xp(device: str):
    if device == "cuda":
        import cupy

        return cupy
    return np


# ------------------------------------------------------------------------------------------------------ models
def gpt(lib):
    """The W6 model in ``lib``: token and position embeddings, pre-norm blocks, final LayerNorm, tied head."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(GPT_WIDTH)
            self.qkv = nn.Linear(GPT_WIDTH, 3 * GPT_WIDTH)
            self.proj = nn.Linear(GPT_WIDTH, GPT_WIDTH)
            self.ln_2 = nn.LayerNorm(GPT_WIDTH)
            self.fc = nn.Linear(GPT_WIDTH, 4 * GPT_WIDTH)
            self.gelu = nn.GELU()
            self.fc_out = nn.Linear(4 * GPT_WIDTH, GPT_WIDTH)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (
                z.view(b, t, GPT_HEADS, c // GPT_HEADS).transpose(1, 2) for z in self.qkv(self.ln_1(x)).split(c, dim=2)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.fc_out(self.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(GPT_VOCAB, GPT_WIDTH)
            self.wpe = nn.Embedding(GPT_CONTEXT, GPT_WIDTH)
            self.blocks = nn.ModuleList([Block() for _ in range(GPT_LAYERS)])
            self.ln_f = nn.LayerNorm(GPT_WIDTH)
            self.head = nn.Linear(GPT_WIDTH, GPT_VOCAB, bias=False)
            self.head.weight = self.wte.weight
            for table in (self.wte, self.wpe):  # as GPT-2: N(0, 1) would start the tied head at a loss near 80
                nn.init.normal_(table.weight, std=0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(lib.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return GPT()


def lstm_lm(lib):
    """The W7 model in ``lib``: ``forward(tokens (T, N), (h, c))`` returns logits (T, N, V) and the new state."""
    nn = lib.nn

    class LSTMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(LSTM_VOCAB, LSTM_EMBED)
            self.rnn = nn.LSTM(LSTM_EMBED, LSTM_HIDDEN, LSTM_LAYERS)
            self.decoder = nn.Linear(LSTM_HIDDEN, LSTM_VOCAB)

        def forward(self, tokens, hidden):
            out, hidden = self.rnn(self.encoder(tokens), hidden)
            return self.decoder(out), hidden

    return LSTMLM()


def weights(make) -> dict:
    """PyTorch's initial weights for ``make``'s model, seeded: every implementation starts from them."""
    torch = _torch()
    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in make(torch).state_dict().items()}


def _model(make, impl: str, device: str, dtype: str):
    lib = _lib(impl)
    model = make(lib)
    model.load_state_dict({k: lib.tensor(v) for k, v in weights(make).items()})
    return model.to(device=device, dtype=getattr(lib, dtype))


def gpt_data(batch: int = GPT_BATCH, context: int = GPT_CONTEXT):
    """Tokens (batch, context) and their next tokens."""
    tokens = np.random.default_rng(0).integers(0, GPT_VOCAB, (batch, context + 1))
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def lstm_data(steps: int = LSTM_STEPS, batch: int = LSTM_BATCH):
    """Sequence-first tokens (steps, batch) and the next tokens flattened, as the example's ``get_batch``."""
    tokens = np.random.default_rng(0).integers(0, LSTM_VOCAB, (steps + 1, batch))
    return tokens[:-1].copy(), tokens[1:].reshape(-1).copy()


# ------------------------------------------------------------------------------------------------------- steps
def gpt_training(impl: str, device: str, batch: int = GPT_BATCH, context: int = GPT_CONTEXT, dtype: str = "float32"):
    """A callable doing one AdamW step of W6 in ``impl``, and the model (or the NumPy step object)."""
    x, y = gpt_data(batch, context)
    if impl == "numpy":
        xp = _xp(device)
        model = numpy_sequence.GPTStep(
            {k: xp.asarray(v, dtype=dtype) for k, v in weights(gpt).items()}, heads=GPT_HEADS, lr=GPT_LR, xp=xp
        )
        xa, ya = xp.asarray(x), xp.asarray(y)
        return (lambda: model.step(xa, ya)), model
    lib = _lib(impl)
    F = lib.nn.functional
    model = _model(gpt, impl, device, dtype)
    opt = lib.optim.AdamW(model.parameters(), lr=GPT_LR)
    xt, yt = lib.tensor(x).to(device), lib.tensor(y).to(device)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(xt).view(-1, GPT_VOCAB), yt.view(-1))
        loss.backward()
        opt.step()
        return loss

    return (trainkit.compile(step) if impl == "compiled" else step), model


def lstm_training(impl: str, device: str, steps: int = LSTM_STEPS, batch: int = LSTM_BATCH, dtype: str = "float32"):
    """A callable doing one clipped SGD step of W7 in ``impl`` (the state carried over from its previous call),
    and the model (or the NumPy step object)."""
    x, y = lstm_data(steps, batch)
    if impl == "numpy":
        xp = _xp(device)
        model = numpy_sequence.LSTMStep(
            {k: xp.asarray(v, dtype=dtype) for k, v in weights(lstm_lm).items()},
            layers=LSTM_LAYERS,
            lr=LSTM_LR,
            clip=LSTM_CLIP,
            xp=xp,
        )
        xa, ya = xp.asarray(x), xp.asarray(y)
        return (lambda: model.step(xa, ya)), model
    lib = _lib(impl)
    F = lib.nn.functional
    model = _model(lstm_lm, impl, device, dtype)
    opt = lib.optim.SGD(model.parameters(), lr=LSTM_LR)
    xt, yt = lib.tensor(x).to(device), lib.tensor(y).to(device)
    zeros = lib.zeros(LSTM_LAYERS, batch, LSTM_HIDDEN, device=device, dtype=getattr(lib, dtype))
    state = [(zeros, zeros.clone())]  # the example's init_hidden

    def step():
        hidden = tuple(h.detach() for h in state[0])  # truncated backpropagation through time
        opt.zero_grad()
        out, state[0] = model(xt, hidden)
        loss = F.cross_entropy(out.view(-1, LSTM_VOCAB), yt)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), LSTM_CLIP)
        opt.step()
        return loss

    return (trainkit.compile(step) if impl == "compiled" else step), model


def gpt_step(impl: str, device: str):
    """W6 for the suite: a callable doing one step of 16 sequences of 64 tokens."""
    return gpt_training(impl, device)[0]


def lstm_step(impl: str, device: str):
    """W7 for the suite: a callable doing one step of 35 time steps of a batch of 20."""
    return lstm_training(impl, device)[0]


# ------------------------------------------------------------------------------------------------------ checks
def _params(model) -> dict:
    if hasattr(model, "state_dict"):
        return {k: np.asarray(v.detach().cpu().numpy()) for k, v in model.state_dict().items()}
    return {k: np.asarray(v.get() if hasattr(v, "get") else v) for k, v in model.params.items()}


def value(loss) -> float:
    """A step's loss as a float, from a Tensor or a number."""
    return float(loss.detach()) if hasattr(loss, "detach") else float(loss)


def _run(training, steps: int, dtype: str) -> tuple[dict, dict]:
    losses, finals = {}, {}
    for impl in ("trainkit", "torch", "numpy"):
        step, model = training(impl, dtype)
        losses[impl] = [value(step()) for _ in range(steps)]
        finals[impl] = _params(model)
    return losses, finals


def _compare(training, steps: int = 3) -> float:
    """Run ``steps`` steps of each implementation from the same weights, in float32 and in float64; assert that
    every step's loss agrees with PyTorch's in both and the final weights in float64; return the largest weight
    difference in float32.

    The weights are compared in float64 because AdamW moves each weight by about lr whatever its gradient's size:
    a gradient that is rounding noise (the key bias's is zero in exact arithmetic, since softmax ignores a shift
    of all scores) moves weights by up to lr in float32, in either direction.
    """
    losses, finals = _run(training, steps, "float32")
    for impl in ("trainkit", "numpy"):
        np.testing.assert_allclose(losses[impl], losses["torch"], rtol=1e-4, err_msg=f"{impl} float32 losses")
    worst = max(float(np.max(np.abs(finals["trainkit"][k] - ref))) for k, ref in finals["torch"].items())
    losses, finals = _run(training, steps, "float64")
    for impl in ("trainkit", "numpy"):
        np.testing.assert_allclose(losses[impl], losses["torch"], rtol=1e-10, err_msg=f"{impl} float64 losses")
        assert finals[impl].keys() == finals["torch"].keys(), impl
        for k, ref in finals["torch"].items():
            assert finals[impl][k].dtype == ref.dtype, (impl, k, finals[impl][k].dtype)
            np.testing.assert_allclose(finals[impl][k], ref, rtol=1e-7, atol=1e-10, err_msg=f"{impl} {k}")
    return worst


def check_gpt(device: str) -> float:
    """Three AdamW steps of W6 on 4 sequences of 16 tokens agree with PyTorch's."""
    return _compare(lambda impl, dtype: gpt_training(impl, device, batch=4, context=16, dtype=dtype))


def check_lstm(device: str) -> float:
    """Three clipped SGD steps of W7 on 10 time steps of a batch of 4 agree with PyTorch's, the state carried."""
    return _compare(lambda impl, dtype: lstm_training(impl, device, steps=10, batch=4, dtype=dtype))
