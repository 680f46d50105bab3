"""Sequence models trained in PyTorch load into trainkit from the files torch.save writes, and the reverse, with
equal outputs: recurrent layers (their weight_ih_l0 / weight_hh_l0_reverse / weight_hr_l0 names), attention and
a whole Transformer."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_numpy

import trainkit


def _lstm(lib):
    return lib.nn.LSTM(6, 8, num_layers=2, bidirectional=True, proj_size=4, batch_first=True)


def _gru(lib):
    return lib.nn.GRU(6, 8, num_layers=2, bidirectional=True)


def _transformer(lib):
    return lib.nn.Transformer(
        d_model=8,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=16,
        dropout=0.0,
        batch_first=True,
    )


def _run(model, lib, x):
    if isinstance(model, lib.nn.Transformer):
        return model(x, x)
    return model(x)[0]


@pytest.mark.parametrize("make", [_lstm, _gru, _transformer], ids=["lstm", "gru", "transformer"])
def test_a_model_saved_by_torch_loads_into_trainkit_and_back(torch, tmp_path, make):
    torch.manual_seed(0)
    ref = make(torch).eval()
    torch.save(ref.state_dict(), tmp_path / "weights.pt")
    model = make(trainkit).eval()
    model.load_state_dict(trainkit.load(tmp_path / "weights.pt"))
    x = np.random.default_rng(0).standard_normal((3, 5, 8 if make is _transformer else 6)).astype(np.float32)
    with torch.no_grad():
        want = to_numpy(_run(ref, torch, torch.tensor(x)))
    with trainkit.no_grad():
        got = to_numpy(_run(model, trainkit, trainkit.tensor(x)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    trainkit.save(model.state_dict(), tmp_path / "back.pt")  # and torch reads what trainkit wrote
    again = make(torch).eval()
    again.load_state_dict(torch.load(tmp_path / "back.pt"))
    assert list(again.state_dict()) == list(ref.state_dict())
    for key, value in ref.state_dict().items():
        np.testing.assert_array_equal(again.state_dict()[key].numpy(), value.numpy())
