"""Recurrent layers over packed sequences, against torch: sorted and unsorted batches, both directions, several
layers, given initial states; outputs stay packed and h_n comes back in the caller's order."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.nn.utils.rnn import PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence

CONFIGS = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 2, "bidirectional": True}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "bias": False}),
]


def make_pair(torch, mode, dtype, **kw):
    torch.manual_seed(0)
    ref = getattr(torch.nn, mode)(3, 5, **kw).to(getattr(torch, dtype))
    ours = getattr(trainkit.nn, mode)(3, 5, **kw).to(getattr(trainkit, dtype))
    ours.load_state_dict({k: trainkit.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    return ref, ours


def weighted(lib, t, k):
    return (t * t * (lib.arange(t.numel(), dtype=t.dtype).reshape(t.shape) * 0.01 + k)).sum()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_packed_input_matches_torch(torch, mode, kw, enforce_sorted, dtype):
    tol = 1e-5 if dtype == "float32" else 1e-10
    ref, ours = make_pair(torch, mode, dtype, **kw)
    rng = np.random.default_rng(2)
    lengths = [5, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4]
    x = rng.standard_normal((5, 4, 3)).astype(dtype)
    d = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    shapes = [(layers * d, 4, kw.get("proj_size", 0) or 5)] + ([(layers * d, 4, 5)] if mode == "LSTM" else [])
    hs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    results = []
    for lib, pack in ((torch, torch.nn.utils.rnn.pack_padded_sequence), (trainkit, pack_padded_sequence)):
        xt = lib.tensor(x, requires_grad=True)
        ht = [lib.tensor(h, requires_grad=True) for h in hs]
        packed = pack(xt, lengths, enforce_sorted=enforce_sorted)
        module = ref if lib is torch else ours
        out, hidden = module(packed, tuple(ht) if mode == "LSTM" else ht[0])
        assert type(out).__name__ == "PackedSequence"
        states = list(hidden) if mode == "LSTM" else [hidden]
        loss = weighted(lib, out.data, 1) + sum(weighted(lib, s, k + 2) for k, s in enumerate(states))
        loss.backward()
        results.append([out.data, *states, xt.grad, *[h.grad for h in ht]] + [p.grad for p in module.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(to_numpy(b), to_numpy(a), rtol=tol * 10, atol=tol * 10)


def test_output_is_packed_with_the_input_batch_sizes_and_indices():
    lstm = trainkit.nn.LSTM(2, 3)
    seqs = [trainkit.randn(2, 2), trainkit.randn(4, 2), trainkit.randn(1, 2)]
    packed = pack_sequence(seqs, enforce_sorted=False)
    out, (h, c) = lstm(packed)
    assert isinstance(out, PackedSequence)
    assert out.batch_sizes.tolist() == packed.batch_sizes.tolist()
    assert out.sorted_indices.tolist() == packed.sorted_indices.tolist()
    padded, lengths = pad_packed_sequence(out)
    assert lengths.tolist() == [2, 4, 1]
    for j, s in enumerate(seqs):  # h_n in the caller's order: each sequence's state after its last step
        alone, (h_j, _) = lstm(s.unsqueeze(1))
        np.testing.assert_allclose(to_numpy(h[0, j]), to_numpy(h_j[0, 0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(to_numpy(padded[: len(s), j]), to_numpy(alone[:, 0]), rtol=1e-5, atol=1e-6)


def test_packed_input_of_wrong_size_is_refused_as_torch(torch):
    def snippet(lib, dev):
        packed = lib.nn.utils.rnn.pack_sequence([lib.zeros(3, 4), lib.zeros(2, 4)])
        return lib.nn.GRU(3, 5)(packed)

    assert_same_error(torch, snippet, "input.size(-1) must be equal to input_size")
