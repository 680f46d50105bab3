"""trainkit.compile: a compiled forward or training step gives eager mode's numbers, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from trainkit import nn

STEPS = 50


def _mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))


def _cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 3),
    )


class _LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1])


class _Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class _Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = _Attention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class _GPT(nn.Module):
    def __init__(self, vocab=20, width=16, heads=2, blocks=2, context=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(trainkit.randn(context, width) * 0.02)
        self.blocks = nn.ModuleList([_Block(width, heads) for _ in range(blocks)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        h = self.tok(x) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln(h)[:, -1])


def _data(kind, rng):
    if kind == "mlp":
        return rng.standard_normal((5, 6)).astype(np.float32)
    if kind == "cnn":
        return rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    return rng.integers(0, 20, (4, 6))


MODELS = {"mlp": _mlp, "cnn": _cnn, "lstm": _LSTMNet, "gpt": _GPT}


def _train(kind, how, optimizer="sgd"):
    """STEPS steps of ``kind`` trained eagerly or compiled ``how`` ('step': the whole step; 'module': the model)."""
    trainkit.manual_seed(0)
    model = MODELS[kind]()
    params = list(model.parameters())
    if optimizer == "sgd":
        opt = trainkit.optim.SGD(params, lr=0.05, momentum=0.9)
    else:
        opt = trainkit.optim.AdamW(params, lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    net = trainkit.compile(model) if how == "module" else model

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    run = trainkit.compile(step) if how == "step" else step
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(STEPS):
        x = trainkit.tensor(_data(kind, rng))
        y = trainkit.tensor(rng.integers(0, 3, x.shape[0]))
        losses.append(run(x, y).item())
    compiled = run if how == "step" else (net.compiled if how == "module" else None)
    return losses, [p.detach().numpy().copy() for p in params], compiled


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("how", ["step", "module"])
def test_compiled_training_equals_eager_bitwise(kind, how):
    losses, params, _ = _train(kind, "eager")
    got_losses, got_params, compiled = _train(kind, how)
    assert compiled.counts["replays"] == STEPS - 1, compiled.fallbacks
    assert got_losses == losses
    for a, b in zip(got_params, params):
        np.testing.assert_array_equal(a, b)


def test_adamw_step_equals_eager():
    losses, params, _ = _train("mlp", "eager", "adamw")
    got_losses, got_params, compiled = _train("mlp", "step", "adamw")
    assert compiled.counts["replays"] == STEPS - 1, compiled.fallbacks
    assert got_losses == losses
    for a, b in zip(got_params, params):
        np.testing.assert_array_equal(a, b)


def test_compiled_module_outputs_carry_one_node_and_grads_accumulate():
    trainkit.manual_seed(0)
    model = _mlp()
    compiled = trainkit.compile(model)
    x = trainkit.randn(4, 6)
    compiled(x).sum().backward()  # captured
    first = model[0].weight.grad.clone()
    out = compiled(x)  # replayed
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    out.sum().backward()
    np.testing.assert_array_equal(model[0].weight.grad.numpy(), (first + first).numpy())


def test_gradient_reaches_an_input_with_history():
    trainkit.manual_seed(0)
    inner = nn.Linear(3, 3)
    compiled = trainkit.compile(nn.Sequential(nn.Linear(3, 2), nn.Tanh()))
    grads = []
    for _ in range(2):
        x = trainkit.randn(2, 3, requires_grad=True)
        h = inner(x)
        compiled(h).pow(2).sum().backward()
        grads.append((x.grad.numpy().copy(), inner.weight.grad.numpy().copy()))
        eager_x = x.detach().requires_grad_()
        inner.weight.grad = None
        compiled.compiled.fn(inner(eager_x)).pow(2).sum().backward()
        np.testing.assert_allclose(eager_x.grad.numpy(), grads[-1][0], rtol=0, atol=0)
        inner.weight.grad = None
    assert compiled.compiled.counts["replays"] == 1


def test_decorator_with_and_without_arguments_and_disable():
    @trainkit.compile
    def double(x):
        return x * 2

    @trainkit.compile(fullgraph=True, mode="reduce-overhead")
    def triple(x):
        return x * 3

    x = trainkit.ones(2)
    assert double(x).tolist() == [2.0, 2.0] and triple(x).tolist() == [3.0, 3.0]
    model = nn.Linear(2, 2)
    assert trainkit.compile(model, disable=True) is model
    wrapped = trainkit.compile(model)
    assert wrapped._orig_mod is model and list(wrapped.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert wrapped.in_features == 2


def test_bad_arguments_are_refused_as_torch_refuses_them(torch):
    for kwargs in ({"mode": "default", "options": {}}, {"mode": "fastest"}):
        with pytest.raises(RuntimeError) as ours:
            trainkit.compile(lambda x: x, **kwargs)
        with pytest.raises(RuntimeError) as theirs:
            torch.compile(lambda x: x, **kwargs)
        assert str(ours.value).split(",")[0] == str(theirs.value).split(",")[0]
    with pytest.raises(RuntimeError, match="Invalid backend: 'nope'"):
        trainkit.compile(lambda x: x, backend="nope")


def test_compile_forward_keeps_the_module_and_guards_it():
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    forward = trainkit.compiler.compile_forward(model)
    x = trainkit.randn(5, 3)
    for _ in range(3):
        out = forward(x)
        out.sum().backward()
    assert forward.counts["replays"] == 2
    expected = model(x)
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy())
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    model.eval()
    forward(x)
    assert any("Sequential.training is now False" in f for f in forward.fallbacks)


def test_compile_train_step_gives_the_trainer_a_compiled_forward():
    trainer = trainkit.Trainer(nn.Linear(2, 1), verbose=False)
    forward = trainkit.compiler.compile_train_step(trainer)
    assert trainer.forward is forward
    x = trainkit.ones(4, 2)
    forward(x)
    np.testing.assert_array_equal(forward(x).detach().numpy(), trainer.model(x).detach().numpy())


def test_comparisons_argmax_and_detach_inside_a_step_are_replayed():
    def make():
        trainkit.manual_seed(0)
        model = _mlp()
        opt = trainkit.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            correct = (out.argmax(1) == y).float().sum()
            positive = (out.detach() > 0).float().mean()
            return loss, correct, positive

        return step

    eager, compiled = make(), trainkit.compile(make())
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = trainkit.tensor(rng.standard_normal((5, 6)).astype(np.float32))
        y = trainkit.tensor(rng.integers(0, 3, 5))
        assert [t.item() for t in compiled(x, y)] == [t.item() for t in eager(x, y)]
    assert compiled.counts["replays"] == 4, compiled.fallbacks


def test_a_step_over_closure_tensors_reads_their_arrays_each_call():
    """Targets and indices reach ops as arrays: those of tensors the function names are read at each replay."""
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 3))
    x = trainkit.tensor([[1, 2, 3], [4, 5, 6]])
    y = trainkit.tensor([0, 2])

    def step():
        return nn.functional.cross_entropy(model(x), y)

    compiled = trainkit.compile(step)
    for _ in range(2):
        compiled()
    x.copy_(trainkit.tensor([[7, 8, 9], [0, 1, 2]]))
    y.copy_(trainkit.tensor([1, 1]))
    assert compiled().item() == step().item()
    assert compiled.counts == {"captures": 1, "replays": 2, "eager": 0}
