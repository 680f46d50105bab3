"""torch.func.functional_call and nn.utils.stateless.functional_call, parameters_to_vector, fusion and skip_init,
against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import trainkit
from tests.conftest import assert_same_error, to_numpy

DTYPES = ["float32", "float64"]


def net(lib, dtype="float32"):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Tanh(), lib.nn.Linear(4, 2)).to(
        getattr(lib, dtype)
    )


class Tied:
    """An embedding whose output layer shares its weight (``decoder.weight is encoder.weight``)."""

    @staticmethod
    def build(lib):
        lib.manual_seed(0)

        class Model(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = lib.nn.Linear(3, 3, bias=False)
                self.decoder = lib.nn.Linear(3, 3, bias=False)
                self.decoder.weight = self.encoder.weight

            def forward(self, x):
                return self.decoder(self.encoder(x))

        return Model()


def numpy_state(module):
    return {k: to_numpy(v) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("dtype", DTYPES)
def test_values_and_gradients_reach_the_given_tensors(torch, dtype):
    results = {}
    reference = numpy_state(net(torch, dtype))
    for lib in (torch, trainkit):
        model = net(lib, dtype)
        model.load_state_dict({k: lib.tensor(v) for k, v in reference.items()})
        given = {k: lib.tensor(v * 0.5, requires_grad="running" not in k) for k, v in reference.items()}
        given = {k: v for k, v in given.items() if "num_batches" not in k}
        x = lib.tensor(np.linspace(-1, 1, 15).reshape(5, 3), dtype=getattr(lib, dtype))
        out = lib.func.functional_call(model, given, (x,))
        (out**2).sum().backward()
        assert all(p.grad is None for p in model.parameters())  # the module's own tensors are untouched
        assert model[0].weight is dict(model.named_parameters())["0.weight"]
        results[lib.__name__] = (out, {k: v.grad for k, v in given.items() if v.grad is not None}, given)
    (t_out, t_grads, t_given), (k_out, k_grads, k_given) = results["torch"], results["trainkit"]
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-11, "atol": 1e-12}
    np.testing.assert_allclose(to_numpy(k_out), to_numpy(t_out), **tol)
    assert set(k_grads) == set(t_grads)
    for key in t_grads:
        np.testing.assert_allclose(to_numpy(k_grads[key]), to_numpy(t_grads[key]), **tol)
    # BatchNorm's running statistics were updated in the given tensors, not in the module's
    np.testing.assert_allclose(to_numpy(k_given["1.running_mean"]), to_numpy(t_given["1.running_mean"]), **tol)


def test_args_kwargs_dict_tuples_and_the_module_is_restored(torch):
    for lib in (torch, trainkit):
        layer = lib.nn.Linear(2, 1)
        before = to_numpy(layer.weight).copy()
        ones = {"weight": lib.ones(1, 2), "bias": lib.zeros(1)}
        assert lib.func.functional_call(layer, ones, lib.ones(1, 2)).tolist() == [[2.0]]
        assert lib.func.functional_call(layer, ({"weight": lib.ones(1, 2)}, {"bias": lib.ones(1)}), (lib.ones(1, 2),))
        out = lib.func.functional_call(layer, ones, kwargs={"input": lib.ones(3, 2)})
        assert tuple(out.shape) == (3, 1)
        np.testing.assert_array_equal(to_numpy(layer.weight), before)
        assert isinstance(layer.weight, lib.nn.Parameter)


def test_tied_weights(torch):
    outs = {}
    for lib in (torch, trainkit):
        model = Tied.build(lib)
        x = lib.ones(1, 3)
        eye = lib.eye(3)
        tied = lib.func.functional_call(model, {"encoder.weight": eye}, x)
        untied = lib.func.functional_call(model, {"encoder.weight": eye}, x, tie_weights=False)
        same = lib.func.functional_call(model, {"encoder.weight": eye, "decoder.weight": eye}, x)
        outs[lib.__name__] = [to_numpy(t) for t in (tied, untied, same)]
        assert model.decoder.weight is model.encoder.weight
    for got, want in zip(outs["trainkit"], outs["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(outs["trainkit"][0], [[1.0, 1.0, 1.0]])

    def two_values(lib, dev):
        lib.func.functional_call(
            Tied.build(lib), {"encoder.weight": lib.eye(3), "decoder.weight": lib.ones(3, 3)}, lib.ones(1, 3)
        )

    assert_same_error(torch, two_values, "functional_call got multiple values for keys", "tie_weights=False")


@pytest.mark.parametrize(
    "given, words",
    [
        ({"weight": None}, ["Missing key(s): 'bias'"]),
        ({"weight": None, "bias": None, "other": None}, ["Unexpected key(s): 'other'"]),
    ],
)
def test_strict_names_missing_and_unexpected_keys(torch, given, words):
    def run(lib, dev):
        layer = lib.nn.Linear(2, 1)
        values = {k: lib.zeros(1, 2) if k == "weight" else lib.zeros(1) for k in given}
        lib.func.functional_call(layer, values, lib.ones(1, 2), strict=True)

    assert_same_error(torch, run, "Error(s) in reparametrizing for Linear", *words)


def test_repeated_keys_and_wrong_containers(torch):
    assert_same_error(
        torch,
        lambda lib, dev: lib.func.functional_call(lib.nn.Linear(1, 1), ({"bias": lib.ones(1)}, {"bias": lib.ones(1)})),
        "appeared in multiple dictionaries",
    )
    assert_same_error(
        torch, lambda lib, dev: lib.func.functional_call(lib.nn.Linear(1, 1), [1, 2]), "to be dictionaries"
    )


def test_stateless_functional_call_is_deprecated_as_in_torch(torch):
    for lib in (torch, trainkit):
        with pytest.warns(FutureWarning, match="Please use `torch.func.functional_call`"):
            out = lib.nn.utils.stateless.functional_call(lib.nn.Linear(1, 1), {"weight": lib.ones(1, 1)}, lib.zeros(1))
        assert out.shape == (1,)


def test_functional_call_on_a_parametrized_original(torch):
    for lib in (torch, trainkit):
        layer = lib.nn.utils.parametrizations.weight_norm(lib.nn.Linear(2, 1, bias=False), dim=None)
        given = {
            "parametrizations.weight.original0": lib.tensor(2.0),
            "parametrizations.weight.original1": lib.ones(1, 2),
        }
        out = lib.func.functional_call(layer, given, lib.ones(1, 2))
        np.testing.assert_allclose(to_numpy(out), [[2 * 2 / np.sqrt(2)]], rtol=1e-6)


# ------------------------------------------------------------------------------- parameters_to_vector and friends
def test_parameters_to_vector_and_back(torch):
    reference = numpy_state(net(torch))
    vectors = {}
    for lib in (torch, trainkit):
        model = net(lib)
        model.load_state_dict({k: lib.tensor(v) for k, v in reference.items()})
        vec = lib.nn.utils.parameters_to_vector(model.parameters())
        (vec * vec).sum().backward()
        vectors[lib.__name__] = (to_numpy(vec), to_numpy(model[0].weight.grad))
        lib.nn.utils.vector_to_parameters(lib.arange(vec.numel(), dtype=lib.float32), model.parameters())
        vectors[lib.__name__] += (numpy_state(model),)
    for got, want in zip(vectors["trainkit"][:2], vectors["torch"][:2]):
        np.testing.assert_array_equal(got, want)
    for key, value in vectors["torch"][2].items():
        np.testing.assert_array_equal(vectors["trainkit"][2][key], value)
    assert_same_error(
        torch, lambda lib, dev: lib.nn.utils.vector_to_parameters([1.0], []), "expected torch.Tensor, but got: list"
    )


@pytest.mark.parametrize("kind", ["conv", "convT", "linear"])
def test_fusion_matches_torch(torch, kind):
    outs = {}
    rng = np.random.default_rng(0)
    stats = [rng.standard_normal(4), rng.uniform(0.5, 2, 4), rng.standard_normal(4), rng.standard_normal(4)]
    x = rng.standard_normal((2, 3, 5, 5) if kind != "linear" else (2, 3)).astype(np.float32)
    for lib in (torch, trainkit):
        lib.manual_seed(0)
        if kind == "conv":
            layer, bn = lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4)
        elif kind == "convT":
            layer, bn = lib.nn.ConvTranspose2d(3, 4, 3), lib.nn.BatchNorm2d(4)
        else:
            layer, bn = lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4)
        bn.load_state_dict(
            {
                "running_mean": lib.tensor(stats[0], dtype=lib.float32),
                "running_var": lib.tensor(stats[1], dtype=lib.float32),
                "weight": lib.tensor(stats[2], dtype=lib.float32),
                "bias": lib.tensor(stats[3], dtype=lib.float32),
                "num_batches_tracked": lib.tensor(0),
            }
        )
        if lib is trainkit:
            layer.load_state_dict({k: lib.tensor(v) for k, v in outs["torch_state"].items()})
        else:
            outs["torch_state"] = numpy_state(layer)
        layer.eval()
        bn.eval()
        if kind == "linear":
            fused = lib.nn.utils.fuse_linear_bn_eval(layer, bn)
        else:
            fused = lib.nn.utils.fuse_conv_bn_eval(layer, bn, transpose=kind == "convT")
        outs[lib.__name__] = (to_numpy(fused(lib.tensor(x))), to_numpy(bn(layer(lib.tensor(x)))))
        assert fused is not layer and isinstance(fused.weight, lib.nn.Parameter)
    np.testing.assert_allclose(outs["trainkit"][0], outs["torch"][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs["trainkit"][0], outs["trainkit"][1], rtol=1e-5, atol=1e-5)
    assert_same_error(
        torch,
        lambda lib, dev: lib.nn.utils.fuse_linear_bn_eval(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2)),
        "Fusion only for eval",
    )


def test_skip_init(torch):
    for lib in (torch, trainkit):
        layer = lib.nn.utils.skip_init(lib.nn.Linear, 5, 1)
        assert tuple(layer.weight.shape) == (1, 5) and isinstance(layer, lib.nn.Linear)
    assert_same_error(torch, lambda lib, dev: lib.nn.utils.skip_init(lib.nn.ReLU), "must support a 'device' arg")
    assert_same_error(torch, lambda lib, dev: lib.nn.utils.skip_init(int), "Expected a Module")
