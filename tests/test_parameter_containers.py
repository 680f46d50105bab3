"""nn.ParameterList and nn.ParameterDict against PyTorch: registration, names, state dicts, list and dict behaviour,
repr, errors, device/dtype moves and optimizers."""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit import nn
from trainkit.layers.container import ParameterDict, ParameterList


def containers(lib):
    """(ParameterList, ParameterDict) of ``lib``."""
    if lib is trainkit:
        return ParameterList, ParameterDict
    return lib.nn.ParameterList, lib.nn.ParameterDict


def arrays():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype("float32") for shape in ((3, 2), (2,), (2, 4), (4,))]


def build(lib):
    """A model with a ParameterList of tensors and a ParameterDict, beside a Linear layer."""
    plist, pdict = containers(lib)
    a = arrays()

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = plist([lib.tensor(a[0]), lib.nn.Parameter(lib.tensor(a[1]))])
            self.extra = pdict({"w": lib.tensor(a[2]), "b": lib.tensor(a[3])})
            self.head = lib.nn.Linear(4, 1)

        def forward(self, x):
            h = lib.relu(x @ self.layers[0] + self.layers[1])
            return self.head(h @ self.extra["w"] + self.extra["b"])

    net = Net()
    with lib.no_grad():  # the same head in both libraries
        net.head.weight.copy_(lib.tensor([[0.5, -0.25, 0.75, -1.0]]))
        net.head.bias.fill_(0.1)
    return net


def test_names_and_state_dict_keys_match_torch(torch):
    ours, theirs = build(trainkit), build(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert (
        list(ours.state_dict())
        == list(theirs.state_dict())
        == [
            "layers.0",
            "layers.1",
            "extra.b",
            "extra.w",
            "head.weight",
            "head.bias",
        ]
    )
    assert len(list(ours.parameters())) == 6
    assert [type(p).__name__ for p in ours.layers] == ["Parameter", "Parameter"]
    assert all(p.requires_grad and p.is_leaf for p in ours.extra.values())


def test_tensors_become_parameters_and_parameters_stay_themselves(torch):
    for lib in (trainkit, torch):
        plist, pdict = containers(lib)
        p = lib.nn.Parameter(lib.zeros(2))
        t = lib.ones(3)
        params = plist([p, t, "not a tensor", None])
        assert params[0] is p
        assert isinstance(params[1], lib.nn.Parameter) and params[1].requires_grad
        assert params[2] == "not a tensor" and params[3] is None
        assert [n for n, _ in params.named_parameters()] == ["0", "1"]
        d = pdict({"p": p, "t": t})
        assert d["p"] is p and isinstance(d["t"], lib.nn.Parameter)
        frozen = lib.nn.Parameter(lib.zeros(1), requires_grad=False)
        d["frozen"] = frozen
        assert d["frozen"] is frozen and not d["frozen"].requires_grad


def test_list_operations_match_torch(torch):
    def run(lib):
        plist, _ = containers(lib)
        params = plist()
        out = [len(params)]
        params.append(lib.zeros(1))
        params.extend([lib.ones(2), lib.full((3,), 2.0)])
        params += (lib.zeros(4),)
        out.append(len(params))
        out.append([p.shape[0] for p in params])
        out.append(params[-1].shape[0])
        out.append([p.shape[0] for p in params[1:3]])
        out.append(type(params[::2]).__name__)
        out.append([p.shape[0] for p in params[::-2]])
        params[1] = lib.zeros(7)
        params[-1] = lib.nn.Parameter(lib.zeros(8))
        out.append([n for n, _ in params.named_parameters()])
        out.append([tuple(p.shape) for p in params.parameters()])
        out.append(list(params.state_dict()))
        out.append([k for k in dir(params) if k.isdigit()])
        return out

    assert run(trainkit) == run(torch)


@pytest.mark.parametrize(
    "op,words",
    [
        (lambda params, lib: params[2], ["index 2 is out of range"]),
        (lambda params, lib: params[-3], ["index -3 is out of range"]),
        (lambda params, lib: params[1.0], ["cannot be interpreted as an integer"]),
        (lambda params, lib: params.__setitem__(5, lib.zeros(1)), ["index 5 is out of range"]),
        (lambda params, lib: params.extend(lib.zeros(2)), ["ParameterList.extend should be called with an iterable"]),
        (lambda params, lib: params.extend(3), ["iterable, but got int"]),
        (lambda params, lib: params.__setitem__(0, 3), ["cannot assign 'int' as parameter '0'"]),
        (lambda params, lib: params(lib.zeros(1)), ["ParameterList should not be called."]),
    ],
)
def test_list_errors_match_torch(torch, op, words):
    def fn(lib, dev):
        plist, _ = containers(lib)
        op(plist([lib.zeros(1), lib.zeros(2)]), lib)

    assert_same_error(torch, fn, *words)


def test_dict_operations_match_torch(torch):
    def run(lib):
        _, pdict = containers(lib)
        d = pdict({"b": lib.zeros(1), "a": lib.zeros(2)})  # a plain dict: sorted, as torch does
        out = [list(d), len(d), "a" in d, "z" in d]
        d.update(OrderedDict([("z", lib.zeros(3)), ("c", lib.zeros(4))]))  # kept in order
        d.update([("y", lib.zeros(5)), ["x", lib.zeros(6)]])
        out += [list(d.keys()), [k for k, _ in d.items()], [tuple(v.shape) for v in d.values()]]
        out.append(tuple(d.pop("z").shape))
        out.append(list(reversed(d)))
        out.append(d.get("nope", "default"))
        out.append(tuple(d.setdefault("a", lib.zeros(9)).shape))
        out.append(tuple(d.setdefault("new", lib.zeros(9)).shape))
        key, value = d.popitem()
        out += [key, tuple(value.shape)]
        copied = d.copy()
        out += [list(copied), copied["a"] is d["a"]]
        made = d.fromkeys(["p", "q"], lib.zeros(2))
        out.append([(k, tuple(v.shape)) for k, v in made.items()])
        merged = d | pdict({"m": lib.zeros(1)})
        out.append(list(merged))
        d |= pdict({"n": lib.zeros(1)})
        out.append(list(d))
        del d["b"]
        out.append([n for n, _ in d.named_parameters()])
        d.clear()
        out += [len(d), list(d.state_dict())]
        return out

    assert run(trainkit) == run(torch)


@pytest.mark.parametrize(
    "op,words",
    [
        (lambda d, lib: d.__setitem__(1, lib.zeros(1)), ["cannot be used as a key as it is not a string", "'int'"]),
        (lambda d, lib: d[1], ["not a string (type is 'int')"]),
        (lambda d, lib: d.__setitem__("a.b", lib.zeros(1)), ["parameter name can", "contain", '"."']),
        (lambda d, lib: d.__setitem__("", lib.zeros(1)), ["parameter name can", "be empty string"]),
        (lambda d, lib: d.__setitem__("update", lib.zeros(1)), ["attribute 'update' already exists"]),
        (lambda d, lib: d.update(3), ["ParametersDict.update should be called with an iterable", "got int"]),
        (lambda d, lib: d.update([3]), ["update sequence element #0 should be Iterable"]),
        (lambda d, lib: d.update([("a", lib.zeros(1), 1)]), ["update sequence element #0 has length 3; 2 is required"]),
        (lambda d, lib: d.pop("missing"), []),
        (lambda d, lib: (d.clear(), d.popitem()), []),
        (lambda d, lib: d(lib.zeros(1)), ["ParameterDict should not be called."]),
    ],
)
def test_dict_errors_match_torch(torch, op, words):
    def fn(lib, dev):
        _, pdict = containers(lib)
        op(pdict({"w": lib.zeros(1)}), lib)

    assert_same_error(torch, fn, *words)


def test_repr_matches_torch(torch):
    def text(lib):
        plist, pdict = containers(lib)
        holder = lib.nn.Module()
        holder.plist = plist([lib.zeros(2, 3), lib.zeros(4, dtype=lib.float64), "text"])
        holder.pdict = pdict({"b": lib.zeros(2, dtype=lib.float64), "a": lib.zeros(1)})
        holder.one = plist([lib.zeros(5)])
        holder.empty = pdict()
        return repr(holder)

    assert text(trainkit) == text(torch).replace("torch.", "trainkit.")


def test_to_and_dtype_moves_keep_the_parameter_objects(device):
    model = build(trainkit)
    before = [id(p) for p in model.parameters()]
    model.to(device=device, dtype=trainkit.float64)
    assert [id(p) for p in model.parameters()] == before
    assert all(p.dtype == trainkit.float64 and p.device.type == device for p in model.parameters())
    assert model.layers[0].dtype == trainkit.float64 and model.extra["w"].dtype == trainkit.float64
    model.float()
    assert model.extra["b"].dtype == trainkit.float32


def test_load_state_dict_fills_the_containers(torch):
    source, target = build(trainkit), build(trainkit)
    with trainkit.no_grad():
        for p in source.parameters():
            p.add_(1.0)
    result = target.load_state_dict(source.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for p, q in zip(source.parameters(), target.parameters()):
        np.testing.assert_array_equal(to_numpy(p), to_numpy(q))
    # a torch state dict of the same model loads too (same names, same shapes)
    tsd = {k: trainkit.tensor(v.detach().numpy()) for k, v in build(torch).state_dict().items()}
    target.load_state_dict(tsd)
    np.testing.assert_array_equal(to_numpy(target.extra["w"]), arrays()[2])
    state = source.state_dict()
    del state["extra.w"]
    with pytest.raises(RuntimeError, match="extra.w"):
        target.load_state_dict(state)


def test_deepcopy_and_save_load(tmp_path):
    model = build(trainkit)
    clone = copy.deepcopy(model)
    assert list(clone.state_dict()) == list(model.state_dict())
    assert clone.layers[0] is not model.layers[0]
    trainkit.save(model.state_dict(), tmp_path / "weights.pt")
    fresh = build(trainkit)
    fresh.load_state_dict(trainkit.load(tmp_path / "weights.pt"))
    np.testing.assert_array_equal(to_numpy(fresh.extra["b"]), to_numpy(model.extra["b"]))


def test_optimizers_train_the_containers_like_torch(torch):
    def run(lib):
        model = build(lib)
        rng = np.random.default_rng(1)
        x = lib.tensor(rng.standard_normal((8, 3)).astype("float32"))
        y = lib.tensor(rng.standard_normal((8, 1)).astype("float32"))
        opt = lib.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(5):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
        return [to_numpy(p).copy() for p in model.parameters()]

    for a, b in zip(run(trainkit), run(torch)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_a_parameter_list_in_a_module_list_and_a_gradient_through_it():
    blocks = nn.ModuleList([ParameterList([trainkit.ones(2), trainkit.ones(2)]) for _ in range(2)])
    loss = sum((p * p).sum() for block in blocks for p in block)
    loss.backward()
    assert [n for n, _ in blocks.named_parameters()] == ["0.0", "0.1", "1.0", "1.1"]
    assert all(to_numpy(p.grad).tolist() == [2.0, 2.0] for p in blocks.parameters())
