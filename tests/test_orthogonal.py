"""parametrizations.orthogonal against torch.nn.utils.parametrizations.orthogonal: the registered weight, its
gradients, the buffer ``base`` for the same seed, and a few SGD steps, for square, tall, wide and batched weights."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from tests.conftest import assert_same_error, to_numpy

CASES = [
    ((4, 4), None, True),
    ((3, 5), None, True),
    ((5, 3), None, True),
    ((4, 4), "householder", True),
    ((5, 3), "householder", False),
    ((3, 5), "householder", False),
    ((4, 4), "matrix_exp", False),  # right_inverse refuses, so the weight itself becomes the original, as in torch
]


def tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-11}


def pair(torch, make, dtype):
    torch.manual_seed(0)
    t_layer = make(torch).to(getattr(torch, dtype))
    k_layer = make(trainkit).to(getattr(trainkit, dtype))
    k_layer.load_state_dict({k: trainkit.tensor(v.numpy()) for k, v in t_layer.state_dict().items()})
    return t_layer, k_layer


def train(lib, layer, x, steps=5):
    optimizer = lib.optim.SGD(layer.parameters(), lr=0.2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((layer(x) - 0.5) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, orthogonal_map, use_trivialization", CASES)
def test_orthogonal_linear_matches_torch(torch, shape, orthogonal_map, use_trivialization, dtype):
    t_layer, k_layer = pair(torch, lambda lib: lib.nn.Linear(shape[1], shape[0]), dtype)
    for lib, layer in ((torch, t_layer), (trainkit, k_layer)):
        lib.manual_seed(5)  # a wide or tall base draws its extra columns from the generator
        lib.nn.utils.parametrizations.orthogonal(
            layer, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization
        )
    assert list(k_layer.state_dict()) == list(t_layer.state_dict())
    for key, value in t_layer.state_dict().items():
        np.testing.assert_allclose(to_numpy(k_layer.state_dict()[key]), to_numpy(value), **tol(dtype))
    w = to_numpy(k_layer.weight).astype(np.float64)
    small = min(shape)
    gram = w @ w.T if shape[0] == small else w.T @ w
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)
    x = np.random.default_rng(0).standard_normal((6, shape[1]))
    t_x, k_x = torch.tensor(x, dtype=getattr(torch, dtype)), trainkit.tensor(x, dtype=getattr(trainkit, dtype))
    np.testing.assert_allclose(train(trainkit, k_layer, k_x), train(torch, t_layer, t_x), **tol(dtype))
    np.testing.assert_allclose(to_numpy(k_layer.weight), to_numpy(t_layer.weight), **tol(dtype))


def test_orthogonal_conv_weight_is_a_batch_of_matrices(torch):
    t_layer, k_layer = pair(torch, lambda lib: lib.nn.Conv2d(2, 3, 3), "float64")
    for lib, layer in ((torch, t_layer), (trainkit, k_layer)):
        lib.nn.utils.parametrizations.orthogonal(layer)
    x = np.random.default_rng(1).standard_normal((2, 2, 6, 6))
    losses = train(trainkit, k_layer, trainkit.tensor(x)), train(torch, t_layer, torch.tensor(x))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-10)


def test_matrix_exp_and_householder_product_match_torch(torch):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 4, 4)) * 3
    np.testing.assert_allclose(
        to_numpy(trainkit.nn.utils.orthogonal.matrix_exp(trainkit.tensor(a))),
        torch.matrix_exp(torch.tensor(a)).numpy(),
        rtol=1e-10,
    )
    h, tau = rng.standard_normal((5, 3)), rng.uniform(0.5, 1.5, 3)
    np.testing.assert_allclose(
        to_numpy(trainkit.nn.utils.orthogonal.householder_product(trainkit.tensor(h), trainkit.tensor(tau))),
        torch.linalg.householder_product(torch.tensor(h), torch.tensor(tau)).numpy(),
        rtol=1e-10,
    )


def test_orthogonal_errors(torch):
    orthogonal = "lib.nn.utils.parametrizations.orthogonal"
    for snippet, words in [
        (f"{orthogonal}(lib.nn.Linear(2, 2), name='bias')", ["Expected a matrix or batch of matrices"]),
        (f"{orthogonal}(lib.nn.Linear(2, 2), name='nothing')", ["has no parameter or buffer with name 'nothing'"]),
        (f"{orthogonal}(lib.nn.Linear(2, 2), orthogonal_map='qr')", ["orthogonal_map has to be one of"]),
    ]:
        assert_same_error(torch, lambda lib, dev, s=snippet: exec(s, {"lib": lib}), *words)
    with pytest.raises(NotImplementedError, match="cayley.*linalg.solve"):
        trainkit.nn.utils.parametrizations.orthogonal(trainkit.nn.Linear(2, 2), orthogonal_map="cayley")
