"""Module, Parameter, containers, state_dict, hooks and summary compared with PyTorch.

The layers used here are defined in this file once, as a function of the library, so that the same classes are built
on trainkit and on torch and every observable (names, order, values, gradients, errors, repr) can be compared.
"""

from __future__ import annotations

import copy
import pickle
import types
from collections import OrderedDict

import numpy as np
import pytest
from conftest import assert_same_error, run_both, to_numpy

import trainkit

# ------------------------------------------------------------------------------------------------------ helpers


def values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def make_classes(lib, dev="cpu"):
    """Small layers with explicit Parameters and buffers, built on ``lib`` (trainkit or torch)."""
    nn = lib.nn

    def tensor(array):
        return lib.tensor(np.asarray(array, dtype=np.float32), device=dev)

    class Lin(nn.Module):
        def __init__(self, n_in, n_out, bias=True):
            super().__init__()
            self.n_in, self.n_out = n_in, n_out
            self.weight = nn.Parameter(tensor(values((n_out, n_in), 10 * n_in + n_out)))
            if bias:
                self.bias = nn.Parameter(tensor(values((n_out,), 100 + 10 * n_in + n_out)))
            else:
                self.register_parameter("bias", None)
            self.register_buffer("scale", tensor(np.linspace(0.5, 1.5, n_out)))
            self.register_buffer("steps", lib.zeros((), dtype=lib.int64, device=dev))

        def forward(self, x):
            y = x.matmul(self.weight.t())
            if self.bias is not None:
                y = y + self.bias
            return y * self.scale

        def extra_repr(self):
            return f"in_features={self.n_in}, out_features={self.n_out}, bias={self.bias is not None}"

    class Act(nn.Module):
        def forward(self, x):
            return x.tanh()

    class Norm(nn.Module):
        """A persistent and a non-persistent buffer, no parameters."""

        def __init__(self, n):
            super().__init__()
            self.register_buffer("mean", tensor(np.full(n, 0.25)))
            self.register_buffer("cache", tensor(np.zeros(n)), persistent=False)

        def forward(self, x):
            return x - self.mean

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = Lin(4, 3)
            self.act = Act()
            self.norm = Norm(3)
            self.fc2 = Lin(3, 2, bias=False)

        def forward(self, x):
            return self.fc2(self.norm(self.act(self.fc1(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = nn.Parameter(tensor([0.5, 2.0]))
            self.block = Block()
            self.head = Lin(2, 2)
            self.register_buffer("offset", tensor([0.1, -0.1]))

        def forward(self, x):
            return self.head(self.block(x) * self.gain) + self.offset

    class Tied(nn.Module):
        """One Lin under two names, and one Parameter registered in two modules."""

        def __init__(self):
            super().__init__()
            self.a = Lin(2, 2)
            self.b = self.a
            self.c = Lin(2, 2)
            self.shared = self.a.weight

        def forward(self, x):
            return self.c(self.b(self.a(x)))

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = Lin(2, 2)

        def forward(self, x, y):
            return self.lin(x) * y

    class WithFactor(nn.Module):
        def forward(self, x, factor):
            return x * x * factor

    return types.SimpleNamespace(
        Lin=Lin, Act=Act, Norm=Norm, Block=Block, Net=Net, Tied=Tied, TwoInputs=TwoInputs, WithFactor=WithFactor
    )


def inputs(lib, dev="cpu", shape=(5, 4), seed=1, requires_grad=False):
    return lib.tensor(values(shape, seed), device=dev, requires_grad=requires_grad)


def names_of(pairs):
    return [name for name, _ in pairs]


def type_names(pairs):
    return [(name, type(value).__name__) for name, value in pairs]


def assert_close(a, b, rtol=1e-5, atol=1e-6):
    if a is None or b is None:
        assert a is None and b is None, f"one is None: {a!r} vs {b!r}"
        return
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol)


def assert_all_close(got, expected, **kwargs):
    assert len(got) == len(expected), f"{len(got)} values vs torch's {len(expected)}"
    for a, b in zip(got, expected):
        assert_close(a, b, **kwargs)


def dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def device_type(t) -> str:
    return str(t.device).split(":")[0]


# ---------------------------------------------------------------------------------------------- registration


def test_attribute_assignment_registers_parameters_modules_and_buffers(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            names_of(net.named_parameters(recurse=False)),
            names_of(net.named_children()),
            names_of(net.named_buffers(recurse=False)),
            [name in vars(net) for name in ("gain", "block", "head", "offset")],
            [name in dir(net) for name in ("gain", "block", "offset")],
            type(net.gain).__name__,
            net.block.fc1 is net._modules["block"]._modules["fc1"],
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["gain"] and got[1] == ["block", "head"] and got[2] == ["offset"]
    assert got[3] == [False, False, False, False]


def test_plain_attributes_are_not_registered(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        lin.note = "x"
        lin.numbers = [1, 2]
        lin.plain = lib.zeros(2)
        return (
            names_of(lin.named_parameters()),
            names_of(lin.named_buffers()),
            list(lin.state_dict()),
            lin.note,
            "plain" in vars(lin),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[-1] is True


def test_non_persistent_buffers_are_listed_but_not_saved(torch):
    def snippet(lib, dev):
        norm = make_classes(lib).Norm(3)
        norm.extra = lib.nn.Buffer(lib.ones(3), persistent=False)
        norm.kept = lib.nn.Buffer(lib.ones(2))
        return names_of(norm.named_buffers()), list(norm.state_dict())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got == (["mean", "cache", "extra", "kept"], ["mean", "kept"])


def test_assigning_plain_tensor_to_buffer_name_replaces_it_and_keeps_persistence(torch):
    def snippet(lib, dev):
        norm = make_classes(lib).Norm(3)
        norm.mean = lib.tensor([1.0, 2.0, 3.0])
        norm.cache = lib.tensor([4.0, 5.0, 6.0])
        return (
            type_names(norm.named_buffers()),
            list(norm.state_dict()),
            norm.mean.tolist(),
            norm.cache.tolist(),
            "mean" in vars(norm),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_assigning_none_to_a_parameter_keeps_the_slot(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        lin.weight = None
        return (
            lin.weight,
            names_of(lin.named_parameters()),
            list(lin.state_dict()),
            "weight" in vars(lin),
            list(lin._parameters),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is None and got[1] == ["bias"] and got[4] == ["weight", "bias"]


@pytest.mark.parametrize("via_none", [False, True])
def test_reassigning_a_parameter_keeps_its_position(torch, via_none):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        if via_none:
            lin.weight = None
        lin.weight = lib.nn.Parameter(lib.zeros(3, 2))
        return names_of(lin.named_parameters()), list(lin.state_dict())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["weight", "bias"]


def test_reassigning_a_child_module_keeps_its_position(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        block = classes.Block()
        block.fc1 = classes.Lin(4, 3)
        return names_of(block.named_children()), names_of(block.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["fc1", "act", "norm", "fc2"]


def test_assigning_a_parameter_over_a_buffer_moves_it(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        lin.scale = lib.nn.Parameter(lib.ones(3))
        return names_of(lin.named_parameters()), names_of(lin.named_buffers()), list(lin.state_dict())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert "scale" in got[0] and "scale" not in got[1]


def test_assigning_a_module_over_a_parameter_moves_it(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        lin = classes.Lin(2, 3)
        lin.bias = None
        lin.extra = classes.Act()
        return names_of(lin.named_parameters()), names_of(lin.named_children())

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_assigning_plain_tensor_to_parameter_name_raises_type_error(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        lin.weight = lib.zeros(3, 2)

    assert_same_error(torch, snippet, "cannot assign", "as parameter 'weight'", "Parameter or None expected")


def test_failed_parameter_assignment_leaves_the_parameter(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        before = lin.weight
        with pytest.raises(TypeError):
            lin.weight = lib.zeros(3, 2)
        return lin.weight is before, names_of(lin.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is True


def test_assigning_non_module_to_module_name_raises_type_error(torch):
    def snippet(lib, dev):
        block = make_classes(lib).Block()
        block.fc1 = 3

    assert_same_error(torch, snippet, "cannot assign 'int' as child module 'fc1'", "Module or None expected")


def test_assigning_non_tensor_to_buffer_name_raises_type_error(torch):
    def snippet(lib, dev):
        norm = make_classes(lib).Norm(3)
        norm.mean = [1.0, 2.0, 3.0]

    assert_same_error(torch, snippet, "cannot assign 'list' as buffer 'mean'")


def test_assigning_none_to_a_child_module_keeps_the_slot(torch):
    def snippet(lib, dev):
        block = make_classes(lib).Block()
        block.act = None
        return block.act, names_of(block.named_children()), names_of(block.named_modules()), list(block._modules)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is None and "act" in got[3]


@pytest.mark.parametrize("kind", ["parameter", "module", "buffer"])
def test_assigning_before_super_init_raises_attribute_error(torch, kind):
    def snippet(lib, dev):
        class Early(lib.nn.Module):
            def __init__(self):
                if kind == "parameter":
                    self.w = lib.nn.Parameter(lib.zeros(2))
                elif kind == "module":
                    self.sub = lib.nn.Module()
                else:
                    self.register_buffer("b", lib.zeros(2))
                super().__init__()

        Early()

    assert_same_error(torch, snippet, "cannot assign", "before Module.__init__() call")


def test_plain_attribute_before_super_init_is_allowed(torch):
    def snippet(lib, dev):
        class Early(lib.nn.Module):
            def __init__(self):
                self.size = 3
                super().__init__()
                self.w = lib.nn.Parameter(lib.zeros(self.size))

        early = Early()
        return early.size, names_of(early.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected == (3, ["w"])


@pytest.mark.parametrize("method", ["register_parameter", "add_module", "register_buffer"])
@pytest.mark.parametrize(
    "name, error, words",
    [
        ("a.b", KeyError, ["name can", "contain", '"."']),
        ("", KeyError, ["name can", "empty"]),
        ("forward", KeyError, ["attribute 'forward' already exists"]),
        ("training", KeyError, ["attribute 'training' already exists"]),
        (3, TypeError, ["name should be a string"]),
    ],
)
def test_register_name_checks(torch, method, name, error, words):
    def snippet(lib, dev):
        module = lib.nn.Module()
        value = {
            "register_parameter": lambda: lib.nn.Parameter(lib.zeros(2)),
            "add_module": lambda: lib.nn.Module(),
            "register_buffer": lambda: lib.zeros(2),
        }[method]()
        getattr(module, method)(name, value)

    got, _ = assert_same_error(torch, snippet, *words)
    assert isinstance(got, error)


@pytest.mark.parametrize(
    "method, value, words",
    [
        ("register_parameter", "tensor", ["cannot assign", "object to parameter 'p'", "Parameter or None required"]),
        ("add_module", "int", ["is not a Module subclass"]),
        ("register_buffer", "list", ["cannot assign 'list' object to buffer 'p'"]),
    ],
)
def test_register_value_checks(torch, method, value, words):
    def snippet(lib, dev):
        module = lib.nn.Module()
        wrong = {"tensor": lib.zeros(2), "int": 3, "list": [1.0]}[value]
        getattr(module, method)("p", wrong)

    got, _ = assert_same_error(torch, snippet, *words)
    assert isinstance(got, TypeError)


def test_register_methods_accept_none_and_replace_their_own_kind(torch):
    def snippet(lib, dev):
        module = lib.nn.Module()
        module.register_parameter("p", None)
        module.register_parameter("p", lib.nn.Parameter(lib.ones(2)))
        module.register_buffer("b", None)
        module.add_module("m", None)
        module.add_module("m", lib.nn.Module())
        module.register_module("n", lib.nn.Module())
        return (
            names_of(module.named_parameters()),
            names_of(module.named_buffers()),
            names_of(module.named_children()),
            list(module.state_dict()),
            module.b,
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got == (["p"], [], ["m", "n"], ["p"], None)


@pytest.mark.parametrize("name", ["bias", "scale", "steps"])
def test_delattr_unregisters_parameters_and_buffers(torch, name):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        delattr(lin, name)
        return (
            names_of(lin.named_parameters()),
            names_of(lin.named_buffers()),
            list(lin.state_dict()),
            hasattr(lin, name),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[-1] is False


def test_delattr_unregisters_modules_and_plain_attributes(torch):
    def snippet(lib, dev):
        block = make_classes(lib).Block()
        block.note = 1
        del block.act
        del block.note
        return names_of(block.named_children()), hasattr(block, "act"), hasattr(block, "note")

    got, expected = run_both(torch, snippet)
    assert got == expected == (["fc1", "norm", "fc2"], False, False)


def test_delattr_of_missing_attribute_raises_attribute_error(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(2, 3)
        del lin.nothing_here

    assert_same_error(torch, snippet, "nothing_here")


def test_getattr_of_missing_attribute_names_class_and_attribute(torch):
    def snippet(lib, dev):
        return make_classes(lib).Lin(2, 3).nothing_here

    assert_same_error(torch, snippet, "'Lin' object has no attribute 'nothing_here'")


def test_calling_a_module_without_forward_raises(torch):
    def snippet(lib, dev):
        lib.nn.Module()(lib.zeros(2))

    assert_same_error(torch, snippet, 'Module [Module] is missing the required "forward" function')


def test_get_submodule_and_get_parameter(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            net.get_submodule("block.fc1") is net.block.fc1,
            net.get_submodule("") is net,
            net.get_parameter("block.fc1.weight") is net.block.fc1.weight,
            net.get_parameter("gain") is net.gain,
        )

    got, expected = run_both(torch, snippet)
    assert got == expected == (True, True, True, True)
    assert_same_error(torch, lambda lib, dev: make_classes(lib).Net().get_submodule("block.nope"), "nope")


# ------------------------------------------------------------------------------------------------- traversal


def test_named_parameters_names_order_and_values(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return net.named_parameters()

    got, expected = run_both(torch, snippet)
    got, expected = list(got), list(expected)
    assert names_of(got) == names_of(expected)
    assert names_of(got) == [
        "gain",
        "block.fc1.weight",
        "block.fc1.bias",
        "block.fc2.weight",
        "head.weight",
        "head.bias",
    ]
    assert_all_close([p for _, p in got], [p for _, p in expected])
    assert all(type(p).__name__ == "Parameter" for _, p in got)


def test_parameters_match_named_parameters(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        params = list(net.parameters())
        named = [p for _, p in net.named_parameters()]
        return len(params), all(a is b for a, b in zip(params, named))

    got, expected = run_both(torch, snippet)
    assert got == expected == (6, True)


def test_named_buffers_and_buffers(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            names_of(net.named_buffers()),
            [b.tolist() for b in net.buffers()],
            [dtype_name(b) for b in net.buffers()],
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0][:3] == ["offset", "block.fc1.scale", "block.fc1.steps"]
    assert "block.norm.cache" in got[0]


def test_children_and_modules(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            type_names(net.named_children()),
            [type(m).__name__ for m in net.children()],
            type_names(net.named_modules()),
            [type(m).__name__ for m in net.modules()],
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[2][:3] == [("", "Net"), ("block", "Block"), ("block.fc1", "Lin")]


def test_shared_modules_and_parameters_are_listed_once(torch):
    def snippet(lib, dev):
        tied = make_classes(lib).Tied()
        return (
            names_of(tied.named_parameters()),
            names_of(tied.named_children()),
            names_of(tied.named_modules()),
            names_of(tied.named_buffers()),
            len(list(tied.parameters())),
            len(list(tied.modules())),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["shared", "a.bias", "c.weight", "c.bias"]
    assert got[1] == ["a", "c"]


def test_remove_duplicate_false_lists_every_name(torch):
    def snippet(lib, dev):
        tied = make_classes(lib).Tied()
        return (
            names_of(tied.named_parameters(remove_duplicate=False)),
            names_of(tied.named_modules(remove_duplicate=False)),
            names_of(tied.named_buffers(remove_duplicate=False)),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert "b.weight" in got[0] and "b" in got[1]


def test_state_dict_lists_shared_tensors_under_every_name(torch):
    def snippet(lib, dev):
        tied = make_classes(lib).Tied()
        sd = tied.state_dict()
        return list(sd), to_numpy(sd["b.weight"]).tolist() == to_numpy(sd["shared"]).tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[1] is True


def test_recurse_false_lists_only_own_members(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            names_of(net.named_parameters(recurse=False)),
            names_of(net.named_buffers(recurse=False)),
            len(list(net.parameters(recurse=False))),
            len(list(net.buffers(recurse=False))),
            names_of(net.block.named_parameters(recurse=False)),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected == (["gain"], ["offset"], 1, 1, [])


def test_prefix_is_prepended_to_every_name(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        return (
            names_of(net.named_parameters(prefix="model")),
            names_of(net.named_buffers(prefix="model")),
            names_of(net.named_modules(prefix="root")),
            names_of(net.named_parameters(prefix="model", recurse=False)),
            list(net.state_dict(prefix="p.")),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0][0] == "model.gain" and got[2][0] == "root"


# ------------------------------------------------------------------------------------------------ Sequential


def make_sequential(lib):
    classes = make_classes(lib)
    return lib.nn.Sequential(classes.Lin(4, 3), classes.Act(), classes.Lin(3, 2)), classes


def test_sequential_names_forward_and_len(torch, device):
    def snippet(lib, dev):
        seq, _ = make_sequential(lib)
        seq.to(dev)
        return (
            names_of(seq.named_parameters()),
            names_of(seq.named_children()),
            len(seq),
            [type(m).__name__ for m in seq],
            seq(inputs(lib, dev)),
        )

    got, expected = run_both(torch, snippet, device)
    assert got[:4] == expected[:4]
    assert got[0] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert_close(got[4], expected[4])


@pytest.mark.parametrize("index", [0, 1, 2, -1, -2, -3])
def test_sequential_indexing(torch, index):
    def snippet(lib, dev):
        seq, _ = make_sequential(lib)
        item = seq[index]
        return type(item).__name__, item is list(seq.children())[index]

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[1] is True


@pytest.mark.parametrize("index", [3, -4])
def test_sequential_index_out_of_range(torch, index):
    assert_same_error(torch, lambda lib, dev: make_sequential(lib)[0][index], "out of range")


@pytest.mark.parametrize("index", [slice(1, None), slice(None, 2), slice(None, None, -1), slice(0, 3, 2)])
def test_sequential_slice_is_a_sequential_of_the_same_layers(torch, index):
    def snippet(lib, dev):
        seq, _ = make_sequential(lib)
        part = seq[index]
        originals = list(seq)[index]
        return (
            type(part).__name__,
            len(part),
            [a is b for a, b in zip(part, originals)],
            names_of(part.named_parameters()),
            list(part._modules),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == "Sequential" and all(got[2])


def test_sequential_from_ordered_dict(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        seq = lib.nn.Sequential(OrderedDict([("enc", classes.Lin(4, 3)), ("act", classes.Act())]))
        return names_of(seq.named_parameters()), seq[0] is seq.enc, seq[-1] is seq.act, list(seq.state_dict())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["enc.weight", "enc.bias"] and got[1] and got[2]


def test_sequential_append_insert_extend(torch, device):
    def snippet(lib, dev):
        seq, classes = make_sequential(lib)
        returned = [
            seq.append(classes.Act()) is seq,
            seq.insert(1, classes.Lin(3, 3)) is seq,
            seq.extend([classes.Lin(2, 2), classes.Act()]) is seq,
            seq.insert(-1, classes.Lin(2, 2)) is seq,
        ]
        seq.to(dev)
        return (
            returned,
            [type(m).__name__ for m in seq],
            names_of(seq.named_parameters()),
            seq(inputs(lib, dev)),
        )

    got, expected = run_both(torch, snippet, device)
    assert got[:3] == expected[:3]
    assert got[0] == [True, True, True, True]
    assert_close(got[3], expected[3])


def test_sequential_insert_out_of_range_raises_index_error(torch):
    def snippet(lib, dev):
        seq, classes = make_sequential(lib)
        seq.insert(5, classes.Act())

    assert_same_error(torch, snippet)


@pytest.mark.parametrize("index", [1, 0, -1, slice(0, 2)])
def test_sequential_del_renumbers(torch, index):
    def snippet(lib, dev):
        seq, _ = make_sequential(lib)
        layers = list(seq)
        del seq[index]
        return list(seq._modules), [layers.index(m) for m in seq], names_of(seq.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_sequential_setitem_replaces_a_layer(torch):
    def snippet(lib, dev):
        seq, classes = make_sequential(lib)
        seq[-1] = classes.Lin(3, 5)
        return [type(m).__name__ for m in seq], names_of(seq.named_parameters()), tuple(seq[2].weight.shape)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[2] == (5, 3)


# ------------------------------------------------------------------------------------------- ModuleList / Dict


def test_module_list_registers_and_edits(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        layers = lib.nn.ModuleList([classes.Lin(2, 2), classes.Act()])
        first = layers[0]
        layers.append(classes.Lin(2, 3))
        layers.extend([classes.Act()])
        layers.insert(1, classes.Lin(2, 4))
        same = layers
        layers += [classes.Norm(2)]
        holder = lib.nn.Module()
        holder.layers = layers
        return (
            same is layers,
            len(layers),
            [type(m).__name__ for m in layers],
            layers[0] is first,
            type(layers[-1]).__name__,
            type(layers[-6]).__name__,
            names_of(holder.named_parameters()),
            names_of(holder.named_buffers()),
            list(holder.state_dict()),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] is True and got[1] == 6
    assert got[6][:4] == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]


def test_module_list_slice_and_index_errors(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        layers = lib.nn.ModuleList([classes.Lin(2, 2), classes.Act(), classes.Lin(2, 3)])
        part = layers[1:]
        return (
            type(part).__name__,
            [a is b for a, b in zip(part, list(layers)[1:])],
            list(part._modules),
            names_of(part.named_parameters()),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == "ModuleList" and got[1] == [True, True]
    assert_same_error(torch, lambda lib, dev: lib.nn.ModuleList([lib.nn.Module()])[1], "out of range")


def test_module_list_del_and_setitem(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        layers = lib.nn.ModuleList([classes.Lin(2, 2), classes.Act(), classes.Lin(2, 3)])
        del layers[0]
        layers[0] = classes.Lin(2, 5)
        return list(layers._modules), [type(m).__name__ for m in layers], names_of(layers.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_module_dict_order_and_dict_methods(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        layers = lib.nn.ModuleDict({"second": classes.Lin(2, 2), "first": classes.Act()})
        layers.update([("third", classes.Lin(2, 3)), ("second", classes.Lin(2, 4))])
        layers.update({"fourth": classes.Norm(2)})
        layers["fifth"] = classes.Act()
        popped = layers.pop("first")
        return (
            list(layers.keys()),
            [type(m).__name__ for m in layers.values()],
            [(k, type(m).__name__) for k, m in layers.items()],
            list(layers),
            len(layers),
            "third" in layers,
            "first" in layers,
            type(popped).__name__,
            tuple(layers["second"].weight.shape),
            names_of(layers.named_parameters()),
            list(layers.state_dict()),
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0] == ["second", "third", "fourth", "fifth"]
    assert got[8] == (4, 2)


# ----------------------------------------------------------------------------------------- modes and freezing


def test_train_and_eval_are_recursive_and_return_self(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        flags = []
        flags.append(net.eval() is net)
        flags.append([m.training for m in net.modules()])
        flags.append(net.train() is net)
        flags.append([m.training for m in net.modules()])
        net.block.eval()
        flags.append([(n, m.training) for n, m in net.named_modules()])
        net.train(False)
        flags.append([m.training for m in net.modules()])
        return flags

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert not any(got[1]) and all(got[3])


def test_train_rejects_non_boolean_mode(torch):
    assert_same_error(torch, lambda lib, dev: make_classes(lib).Net().train("yes"), "boolean")


def test_requires_grad_false_freezes_every_parameter(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib, dev).Net()
        returned = net.requires_grad_(False) is net
        frozen = [p.requires_grad for p in net.parameters()]
        out = net(inputs(lib, dev))
        state = (out.requires_grad, out.is_leaf, out.grad_fn is None)
        net.requires_grad_()
        thawed = [p.requires_grad for p in net.parameters()]
        again = net(inputs(lib, dev))
        return returned, frozen, state, thawed, again.requires_grad, again.is_leaf

    got, expected = run_both(torch, snippet, device)
    assert got == expected
    assert got[2] == (False, True, True)


def test_freezing_a_sub_module_leaves_its_grads_unset(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib, dev).Net()
        net.block.requires_grad_(False)
        net(inputs(lib, dev)).sum().backward()
        return [(name, p.grad is None) for name, p in net.named_parameters()], [p.grad for p in net.parameters()]

    got, expected = run_both(torch, snippet, device)
    assert got[0] == expected[0]
    assert_all_close(got[1], expected[1], rtol=1e-4, atol=1e-5)


def test_zero_grad_to_none_and_to_zeros(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib, dev).Net()
        net(inputs(lib, dev)).sum().backward()
        grads = [p.grad for p in net.parameters()]
        net.zero_grad(set_to_none=False)
        kept = [p.grad is g for p, g in zip(net.parameters(), grads)]
        zeros = [float(to_numpy(p.grad).sum()) == 0.0 and not p.grad.requires_grad for p in net.parameters()]
        net(inputs(lib, dev)).sum().backward()
        refilled = [p.grad for p in net.parameters()]
        net.zero_grad()
        cleared = [p.grad is None for p in net.parameters()]
        return kept, zeros, cleared, refilled

    got, expected = run_both(torch, snippet, device)
    assert got[:3] == expected[:3]
    assert all(got[0]) and all(got[1]) and all(got[2])
    assert_all_close(got[3], expected[3], rtol=1e-4, atol=1e-5)


# -------------------------------------------------------------------------------------------------- apply / to


@pytest.mark.parametrize("model", ["Net", "Tied"])
def test_apply_visits_children_first_then_self(torch, model):
    def snippet(lib, dev):
        net = getattr(make_classes(lib), model)()
        names = {}
        for name, module in net.named_modules():
            names.setdefault(id(module), name)
        order = []
        returned = net.apply(lambda m: order.append(names[id(m)]))
        return order, returned is net

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[0][-1] == "" and got[1] is True


def test_apply_for_initialisation(torch, device):
    def snippet(lib, dev):
        classes = make_classes(lib, dev)
        net = classes.Net()

        def init(module):
            if isinstance(module, classes.Lin):
                with lib.no_grad():
                    module.weight.fill_(0.25)
                    if module.bias is not None:
                        module.bias.zero_()

        net.apply(init)
        return net(inputs(lib, dev)), [p for p in net.parameters()]

    got, expected = run_both(torch, snippet, device)
    assert_close(got[0], expected[0])
    assert_all_close(got[1], expected[1])


@pytest.mark.parametrize("method", ["to", "double", "to_kwarg"])
def test_to_dtype_casts_floating_tensors_and_keeps_parameter_identity(torch, method):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        net(inputs(lib)).sum().backward()
        params = list(net.parameters())
        if method == "to":
            returned = net.to(lib.float64)
        elif method == "double":
            returned = net.double()
        else:
            returned = net.to(dtype=lib.float64)
        out = net(inputs(lib).double())
        return (
            returned is net,
            [a is b for a, b in zip(net.parameters(), params)],
            [type(p).__name__ for p in net.parameters()],
            [(n, dtype_name(t)) for n, t in net.state_dict().items()],
            [dtype_name(p.grad) for p in net.parameters()],
            [p.requires_grad for p in net.parameters()],
            [p.is_leaf for p in net.parameters()],
            dtype_name(out),
            to_numpy(out).tolist(),
        )

    got, expected = run_both(torch, snippet)
    assert got[:8] == expected[:8]
    assert all(got[1]) and got[7] == "float64"
    assert dict(got[3])["block.fc1.steps"] == "int64"
    np.testing.assert_allclose(got[8], expected[8], rtol=1e-10)


def test_float_casts_back_from_double(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net().double().float()
        return [(n, dtype_name(t)) for n, t in net.state_dict().items()]

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_to_integer_dtype_raises_type_error(torch):
    assert_same_error(torch, lambda lib, dev: make_classes(lib).Net().to(lib.int64), "floating point")


def test_to_device_moves_parameters_and_buffers_keeping_identity(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        params = list(net.parameters())
        returned = net.to(dev)
        out = net(inputs(lib, dev))
        return (
            returned is net,
            [a is b for a, b in zip(net.parameters(), params)],
            {device_type(t) for t in net.state_dict().values()},
            [p.requires_grad for p in net.parameters()],
            out,
        )

    got, expected = run_both(torch, snippet, device)
    assert got[0] is True and all(got[1])
    assert got[2] == {device}
    assert got[3] == expected[3]
    assert_close(got[4], expected[4])
    assert device_type(got[4]) == device


@pytest.mark.skipif(not trainkit.cuda.is_available(), reason="no usable GPU")
def test_cuda_and_cpu_round_trip_keeps_values_and_grads():
    net = make_classes(trainkit).Net()
    net(inputs(trainkit)).sum().backward()
    before = {n: to_numpy(t) for n, t in net.state_dict().items()}
    grads = [to_numpy(p.grad) for p in net.parameters()]
    net.cuda()
    assert {device_type(t) for t in net.state_dict().values()} == {"cuda"}
    assert {device_type(p.grad) for p in net.parameters()} == {"cuda"}
    net.cpu()
    assert {device_type(t) for t in net.state_dict().values()} == {"cpu"}
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(to_numpy(value), before[name])
    for p, g in zip(net.parameters(), grads):
        np.testing.assert_array_equal(to_numpy(p.grad), g)


# ------------------------------------------------------------------------------------------------- state_dict


def test_state_dict_keys_order_and_values(torch, device):
    def snippet(lib, dev):
        return make_classes(lib, dev).Net().state_dict()

    got, expected = run_both(torch, snippet, device)
    assert list(got) == list(expected)
    assert list(got) == [
        "gain",
        "offset",
        "block.fc1.weight",
        "block.fc1.bias",
        "block.fc1.scale",
        "block.fc1.steps",
        "block.norm.mean",
        "block.fc2.weight",
        "block.fc2.scale",
        "block.fc2.steps",
        "head.weight",
        "head.bias",
        "head.scale",
        "head.steps",
    ]
    assert_all_close(list(got.values()), list(expected.values()))
    assert [dtype_name(t) for t in got.values()] == [dtype_name(t) for t in expected.values()]


def test_state_dict_tensors_are_detached_and_share_storage(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib, dev).Net()
        sd = net.state_dict()
        flags = [
            (type(sd["gain"]).__name__, sd["gain"].requires_grad, sd["gain"].is_leaf, sd["gain"] is net.gain),
            (sd["block.fc1.scale"].requires_grad, sd["block.fc1.scale"] is net.block.fc1.scale),
        ]
        sd["block.fc1.weight"].add_(1.0)
        sd["block.fc1.scale"].mul_(2.0)
        sd["head.steps"].add_(3)
        return flags, net.block.fc1.weight, net.block.fc1.scale, int(net.head.steps.item()), net.block.fc1.weight.grad

    got, expected = run_both(torch, snippet, device)
    assert got[0] == expected[0]
    assert got[0][0] == ("Tensor", False, True, False)
    assert_close(got[1], expected[1])
    assert_close(got[2], expected[2])
    assert got[3] == expected[3] == 3
    assert got[4] is None


def test_state_dict_keep_vars_returns_the_parameters_themselves(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        sd = net.state_dict(keep_vars=True)
        params = dict(net.named_parameters())
        buffers = dict(net.named_buffers())
        return (
            [sd[n] is p for n, p in params.items()],
            [sd[n] is b for n, b in buffers.items() if n in sd],
            [type(v).__name__ for v in sd.values()],
        )

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert all(got[0]) and all(got[1])


def perturbed_state(lib, dev):
    """A Net whose parameters and buffers differ from a fresh one's, and its state_dict."""
    net = make_classes(lib, dev).Net()
    with lib.no_grad():
        for i, t in enumerate(net.state_dict().values()):
            t.add_(i + 1)
    return net, net.state_dict()


def test_load_state_dict_round_trip_gives_identical_outputs(torch, device):
    def snippet(lib, dev):
        source, sd = perturbed_state(lib, dev)
        target = make_classes(lib, dev).Net()
        params = list(target.parameters())
        result = target.load_state_dict(sd)
        x = inputs(lib, dev)
        same_out = np.array_equal(to_numpy(source(x)), to_numpy(target(x)))
        with lib.no_grad():
            source.gain.mul_(10.0)
        independent = not np.array_equal(to_numpy(source.gain), to_numpy(target.gain))
        return (
            list(result.missing_keys),
            list(result.unexpected_keys),
            same_out,
            independent,
            [a is b for a, b in zip(target.parameters(), params)],
            [p.requires_grad for p in target.parameters()],
            int(target.head.steps.item()),
            target(x),
        )

    got, expected = run_both(torch, snippet, device)
    assert got[:7] == expected[:7]
    assert got[:4] == ([], [], True, True)
    assert_close(got[7], expected[7])


def test_load_state_dict_result_is_a_named_tuple(torch):
    def snippet(lib, dev):
        net = make_classes(lib).Net()
        result = net.load_state_dict(net.state_dict())
        return result.missing_keys, result.unexpected_keys, tuple(result)

    got, expected = run_both(torch, snippet)
    assert got == expected == ([], [], ([], []))


def test_load_state_dict_strict_names_every_missing_key(torch):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        del sd["head.bias"], sd["block.fc1.scale"]
        make_classes(lib).Net().load_state_dict(sd)

    got, _ = assert_same_error(
        torch,
        snippet,
        "Error(s) in loading state_dict for Net",
        "Missing key(s) in state_dict",
        '"block.fc1.scale"',
        '"head.bias"',
    )
    assert "Unexpected" not in str(got)


def test_load_state_dict_strict_names_every_unexpected_key(torch):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        sd["extra.weight"] = lib.zeros(2)
        sd["head.other"] = lib.zeros(1)
        make_classes(lib).Net().load_state_dict(sd)

    got, _ = assert_same_error(torch, snippet, "Unexpected key(s) in state_dict", '"extra.weight"', '"head.other"')
    assert "Missing" not in str(got)


@pytest.mark.parametrize("strict", [True, False])
def test_load_state_dict_names_every_shape_mismatch(torch, strict):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        sd["head.weight"] = lib.zeros(3, 2)
        sd["block.fc1.scale"] = lib.zeros(4)
        make_classes(lib).Net().load_state_dict(sd, strict=strict)

    assert_same_error(
        torch,
        snippet,
        "size mismatch for head.weight",
        "size mismatch for block.fc1.scale",
        "from checkpoint",
        "the shape in current model is",
    )


def test_load_state_dict_strict_error_lists_all_problem_kinds(torch):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        del sd["gain"]
        sd["surplus"] = lib.zeros(1)
        sd["head.bias"] = lib.zeros(7)
        make_classes(lib).Net().load_state_dict(sd)

    got, expected = assert_same_error(
        torch, snippet, "Missing key(s)", '"gain"', "Unexpected key(s)", '"surplus"', "size mismatch for head.bias"
    )
    for message in (str(got), str(expected)):
        assert message.index("Missing") < message.index("Unexpected") < message.index("size mismatch")


def test_load_state_dict_non_strict_reports_and_loads_the_rest(torch, device):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        del sd["head.bias"], sd["block.norm.mean"]
        sd["surplus"] = lib.zeros(1, device=dev)
        sd["block.extra"] = lib.zeros(1, device=dev)
        target = make_classes(lib, dev).Net()
        fresh_bias = to_numpy(target.head.bias).copy()
        result = target.load_state_dict(sd, strict=False)
        return (
            list(result.missing_keys),
            list(result.unexpected_keys),
            np.array_equal(to_numpy(target.head.bias), fresh_bias),
            target.block.fc1.weight,
            target.gain,
        )

    got, expected = run_both(torch, snippet, device)
    assert got[:3] == expected[:3]
    assert got[0] == ["block.norm.mean", "head.bias"]
    assert got[1] == ["surplus", "block.extra"]
    assert got[2] is True
    assert_close(got[3], expected[3])
    assert_close(got[4], expected[4])


def test_load_state_dict_lists_unexpected_keys_in_module_order(torch):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        sd["head.other"] = lib.zeros(1)
        sd["block.fc1.other"] = lib.zeros(1)
        sd["surplus"] = lib.zeros(1)
        return list(make_classes(lib).Net().load_state_dict(sd, strict=False).unexpected_keys)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert sorted(got) == ["block.fc1.other", "head.other", "surplus"]


@pytest.mark.parametrize("problem", ["missing", "unexpected", "shape"])
def test_load_state_dict_copies_nothing_when_it_raises(problem):
    _, sd = perturbed_state(trainkit, "cpu")
    if problem == "missing":
        del sd["head.bias"]
    elif problem == "unexpected":
        sd["surplus"] = trainkit.zeros(1)
    else:
        sd["head.bias"] = trainkit.zeros(5)
    target = make_classes(trainkit).Net()
    before = {n: to_numpy(t).copy() for n, t in target.state_dict().items()}
    with pytest.raises(RuntimeError):
        target.load_state_dict(sd)
    for name, value in target.state_dict().items():
        np.testing.assert_array_equal(to_numpy(value), before[name], err_msg=name)


def test_load_state_dict_does_not_record_autograd_history(torch):
    def snippet(lib, dev):
        _, sd = perturbed_state(lib, dev)
        sd = {k: (v.clone().requires_grad_() if v.is_floating_point() else v) for k, v in sd.items()}
        target = make_classes(lib).Net()
        target.load_state_dict(sd)
        return [(p.is_leaf, p.requires_grad, p.grad_fn is None) for p in target.parameters()]

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert all(flags == (True, True, True) for flags in got)


# -------------------------------------------------------------------------------------------------------- hooks


def test_forward_pre_hook_can_replace_the_arguments(torch, device):
    def snippet(lib, dev):
        lin = make_classes(lib, dev).Lin(4, 3)
        seen = []

        def double(module, args):
            seen.append((module is lin, type(args).__name__, len(args)))
            return (args[0] * 2,)

        def shift(module, args):
            return args[0] + 1

        lin.register_forward_pre_hook(double)
        lin.register_forward_pre_hook(shift)
        out = lin(inputs(lib, dev))
        return seen, out

    got, expected = run_both(torch, snippet, device)
    assert got[0] == expected[0] == [(True, "tuple", 1)]
    assert_close(got[1], expected[1])


def test_forward_hook_sees_args_and_can_replace_the_output(torch, device):
    def snippet(lib, dev):
        lin = make_classes(lib, dev).Lin(4, 3)
        seen = []

        def record(module, args, output):
            seen.append((module is lin, type(args).__name__, len(args), tuple(output.shape)))

        def negate(module, args, output):
            return -output

        lin.register_forward_hook(record)
        lin.register_forward_hook(negate)
        lin.register_forward_hook(record)
        out = lin(inputs(lib, dev))
        return seen, out

    got, expected = run_both(torch, snippet, device)
    assert got[0] == expected[0] == [(True, "tuple", 1, (5, 3))] * 2
    assert_close(got[1], expected[1])


@pytest.mark.parametrize("kind", ["forward_pre", "forward", "full_backward"])
def test_prepend_puts_a_hook_first(torch, kind):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(4, 3)
        calls = []
        register = getattr(lin, f"register_{kind}_hook")

        def hook(label):
            return lambda *args: calls.append(label)

        register(hook("first"))
        register(hook("second"))
        register(hook("third"), prepend=True)
        register(hook("fourth"))
        register(hook("fifth"), prepend=True)
        lin(inputs(lib, requires_grad=True)).sum().backward()
        return calls

    got, expected = run_both(torch, snippet)
    assert got == expected == ["fifth", "third", "first", "second", "fourth"]


@pytest.mark.parametrize("kind", ["forward_pre", "forward", "full_backward"])
def test_removed_hooks_are_not_called(torch, kind):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(4, 3)
        calls = []
        register = getattr(lin, f"register_{kind}_hook")
        handle = register(lambda *args: calls.append("removed"))
        register(lambda *args: calls.append("kept"))
        lin(inputs(lib, requires_grad=True)).sum().backward()
        handle.remove()
        handle.remove()
        lin(inputs(lib, requires_grad=True)).sum().backward()
        with register(lambda *args: calls.append("scoped")):
            lin(inputs(lib, requires_grad=True)).sum().backward()
        lin(inputs(lib, requires_grad=True)).sum().backward()
        return calls

    got, expected = run_both(torch, snippet)
    assert got == expected == ["removed", "kept", "kept", "kept", "scoped", "kept"]


def record_backward(module, log):
    def hook(mod, grad_input, grad_output):
        log.append((tuple(grad_input), tuple(grad_output)))

    return module.register_full_backward_hook(hook)


def compare_grad_tuples(got, expected):
    assert [g is None for g in got] == [g is None for g in expected], f"None positions: {got} vs {expected}"
    assert_all_close(got, expected, rtol=1e-4, atol=1e-5)


def test_full_backward_hook_sees_grad_input_and_grad_output(torch, device):
    def snippet(lib, dev):
        lin = make_classes(lib, dev).Lin(4, 3)
        log = []
        record_backward(lin, log)
        x = inputs(lib, dev, requires_grad=True)
        out = lin(x)
        (out * out).sum().backward()
        return log, x.grad

    got, expected = run_both(torch, snippet, device)
    assert len(got[0]) == len(expected[0]) == 1
    (got_in, got_out), (exp_in, exp_out) = got[0][0], expected[0][0]
    compare_grad_tuples(got_in, exp_in)
    compare_grad_tuples(got_out, exp_out)
    assert_close(got_in[0], got[1], rtol=1e-5, atol=1e-6)


def test_full_backward_hook_is_called_once_per_backward(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        seq = lib.nn.Sequential(classes.Lin(4, 3), classes.Act(), classes.Lin(3, 2))
        log = []
        record_backward(seq[0], log)
        record_backward(seq, log)
        x = inputs(lib, requires_grad=True)
        seq(x).sum().backward()
        first = len(log)
        out = seq(x)
        out.sum().backward()
        return first, len(log)

    got, expected = run_both(torch, snippet)
    assert got == expected == (2, 4)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_full_backward_hook_when_the_input_does_not_require_grad(torch, device):
    def snippet(lib, dev):
        lin = make_classes(lib, dev).Lin(4, 3)
        log = []
        record_backward(lin, log)
        out = lin(inputs(lib, dev))
        (out * out).sum().backward()
        return log, lin.weight.grad

    got, expected = run_both(torch, snippet, device)
    assert len(got[0]) == len(expected[0]) == 1
    (got_in, got_out), (exp_in, exp_out) = got[0][0], expected[0][0]
    assert got_in == exp_in == (None,)
    compare_grad_tuples(got_out, exp_out)
    assert_close(got[1], expected[1], rtol=1e-4, atol=1e-5)


def test_full_backward_hook_grad_input_has_a_slot_per_positional_tensor(torch, device):
    def snippet(lib, dev):
        module = make_classes(lib, dev).TwoInputs()
        log = []
        record_backward(module, log)
        x = inputs(lib, dev, shape=(3, 2), requires_grad=True)
        y = inputs(lib, dev, shape=(3, 2), seed=2)
        module(x, y).sum().backward()
        return log

    got, expected = run_both(torch, snippet, device)
    assert len(got) == len(expected) == 1
    compare_grad_tuples(got[0][0], expected[0][0])
    compare_grad_tuples(got[0][1], expected[0][1])


def test_full_backward_hook_grad_input_has_a_slot_per_positional_argument(torch, device):
    def snippet(lib, dev):
        module = make_classes(lib, dev).WithFactor()
        log = []
        record_backward(module, log)
        x = inputs(lib, dev, shape=(3, 2), requires_grad=True)
        module(x, 3.0).sum().backward()
        return log, x.grad

    got, expected = run_both(torch, snippet, device)
    assert len(got[0]) == len(expected[0]) == 1
    compare_grad_tuples(got[0][0][0], expected[0][0][0])
    compare_grad_tuples(got[0][0][1], expected[0][0][1])
    assert_close(got[1], expected[1])


def test_full_backward_hook_with_tuple_output_and_an_unused_output(torch, device):
    def snippet(lib, dev):
        class Split(lib.nn.Module):
            def forward(self, x):
                return x * 2.0, x * x

        module = Split()
        log = []
        record_backward(module, log)
        x = inputs(lib, dev, shape=(3,), requires_grad=True)
        first, _ = module(x)
        (first * first).sum().backward()
        return log, x.grad

    got, expected = run_both(torch, snippet, device)
    assert len(got[0]) == len(expected[0]) == 1
    compare_grad_tuples(got[0][0][0], expected[0][0][0])
    compare_grad_tuples(got[0][0][1], expected[0][0][1])
    assert expected[0][0][1][1] is None
    assert_close(got[1], expected[1])


def test_full_backward_hook_can_replace_grad_input(torch, device):
    def snippet(lib, dev):
        classes = make_classes(lib, dev)
        seq = lib.nn.Sequential(classes.Lin(4, 3), classes.Act(), classes.Lin(3, 2))
        calls = []

        def scale(module, grad_input, grad_output):
            calls.append("scale")
            return tuple(None if g is None else g * 3.0 for g in grad_input)

        seq[2].register_full_backward_hook(scale)
        seq[0].register_full_backward_hook(lambda m, gi, go: calls.append("first") or (gi[0] + 1.0,))
        x = inputs(lib, dev, requires_grad=True)
        (seq(x) ** 2).sum().backward()
        return calls, x.grad, [p.grad for p in seq.parameters()]

    got, expected = run_both(torch, snippet, device)
    assert got[0] == expected[0] == ["scale", "first"]
    assert_close(got[1], expected[1], rtol=1e-4, atol=1e-5)
    assert_all_close(got[2], expected[2], rtol=1e-4, atol=1e-5)


def test_full_backward_hooks_chain_their_replacements(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(4, 3)
        seen = []

        def first(module, grad_input, grad_output):
            return (grad_input[0] * 2.0,)

        def second(module, grad_input, grad_output):
            seen.append(grad_input[0])

        lin.register_full_backward_hook(first)
        lin.register_full_backward_hook(second)
        x = inputs(lib, requires_grad=True)
        lin(x).sum().backward()
        return seen, x.grad

    got, expected = run_both(torch, snippet)
    assert len(got[0]) == len(expected[0]) == 1
    assert_close(got[0][0], expected[0][0], rtol=1e-5, atol=1e-6)
    assert_close(got[1], expected[1], rtol=1e-5, atol=1e-6)


def test_hook_order_across_nested_modules(torch):
    def snippet(lib, dev):
        block = make_classes(lib).Block()
        events = []
        for name, module in block.named_modules():
            label = name or "block"
            module.register_forward_pre_hook(lambda m, a, label=label: events.append(f"pre {label}"))
            module.register_forward_hook(lambda m, a, o, label=label: events.append(f"fwd {label}"))
            module.register_full_backward_hook(lambda m, gi, go, label=label: events.append(f"bwd {label}"))
        out = block(inputs(lib, requires_grad=True))
        events.append("backward")
        out.sum().backward()
        return events

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[:2] == ["pre block", "pre fc1"]
    assert got[-1] == "bwd block"


def test_backward_hook_output_with_forward_hook_replacing_output(torch, device):
    def snippet(lib, dev):
        lin = make_classes(lib, dev).Lin(4, 3)
        log = []
        lin.register_forward_hook(lambda m, a, o: o * 2.0)
        record_backward(lin, log)
        x = inputs(lib, dev, requires_grad=True)
        (lin(x) ** 2).sum().backward()
        return log, x.grad

    got, expected = run_both(torch, snippet, device)
    assert len(got[0]) == len(expected[0]) == 1
    compare_grad_tuples(got[0][0][0], expected[0][0][0])
    compare_grad_tuples(got[0][0][1], expected[0][0][1])
    assert_close(got[1], expected[1], rtol=1e-4, atol=1e-5)


def test_backward_hooks_are_skipped_under_no_grad(torch):
    def snippet(lib, dev):
        lin = make_classes(lib).Lin(4, 3)
        calls = []
        lin.register_full_backward_hook(lambda *args: calls.append("bwd"))
        with lib.no_grad():
            out = lin(inputs(lib, requires_grad=True))
        return calls, out.requires_grad, out.grad_fn is None

    got, expected = run_both(torch, snippet)
    assert got == expected == ([], False, True)


# --------------------------------------------------------------------------------------------------------- repr


def test_repr_of_nested_modules_matches_torch(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        net = classes.Net()
        net.tail = lib.nn.Sequential(OrderedDict([("act", classes.Act()), ("out", classes.Lin(2, 1))]))
        net.layers = lib.nn.ModuleDict({"x": classes.Lin(2, 2), "y": classes.Norm(2)})
        return repr(net)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert "(fc1): Lin(in_features=4, out_features=3, bias=True)" in got


def test_repr_with_multi_line_extra_repr_and_empty_slot(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)

        class Multi(lib.nn.Module):
            def __init__(self, with_child):
                super().__init__()
                if with_child:
                    self.child = classes.Act()
                    self.add_module("empty", None)

            def extra_repr(self):
                return "first line\nsecond line"

        return repr(Multi(False)), repr(Multi(True)), repr(classes.Act()), repr(lib.nn.Sequential())

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_repr_of_a_module_list_of_repeated_layers_matches_torch(torch):
    def snippet(lib, dev):
        classes = make_classes(lib)
        layers = [classes.Lin(2, 2), classes.Lin(2, 2), classes.Lin(2, 2), classes.Act(), classes.Lin(2, 3)]
        return repr(lib.nn.ModuleList(layers))

    got, expected = run_both(torch, snippet)
    assert got == expected


# ---------------------------------------------------------------------------------------------------- Parameter


def test_parameter_is_a_leaf_that_requires_grad(torch):
    def snippet(lib, dev):
        base = lib.tensor([1.0, 2.0])
        p = lib.nn.Parameter(base)
        frozen = lib.nn.Parameter(lib.tensor([3.0]), requires_grad=False)
        return (
            p.is_leaf,
            p.requires_grad,
            p.grad_fn is None,
            isinstance(p, lib.Tensor),
            type(p).__name__,
            frozen.requires_grad,
            frozen.is_leaf,
            type(frozen).__name__,
        )

    got, expected = run_both(torch, snippet)
    assert got == expected == (True, True, True, True, "Parameter", False, True, "Parameter")


def test_parameter_from_a_non_leaf_is_a_leaf(torch):
    def snippet(lib, dev):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        p = lib.nn.Parameter(x * 2)
        p.sum().backward()
        return p.is_leaf, p.requires_grad, p.grad_fn is None, x.grad, p.grad.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected == (True, True, True, None, [1.0, 1.0])


def test_parameter_shares_storage_with_its_tensor(torch):
    def snippet(lib, dev):
        base = lib.tensor([1.0, 2.0])
        p = lib.nn.Parameter(base)
        base.add_(1.0)
        return p.tolist()

    got, expected = run_both(torch, snippet)
    assert got == expected == [2.0, 3.0]


def test_parameter_without_data_is_empty(torch):
    def snippet(lib, dev):
        p = lib.nn.Parameter()
        return tuple(p.shape), dtype_name(p), p.requires_grad

    got, expected = run_both(torch, snippet)
    assert got == expected


def test_parameter_of_integers_cannot_require_grad(torch):
    assert_same_error(torch, lambda lib, dev: lib.nn.Parameter(lib.tensor([1, 2])), "floating point")


def test_parameter_repr_matches_torch(torch):
    def snippet(lib, dev):
        return (
            repr(lib.nn.Parameter(lib.tensor([1.0, 2.5]))),
            repr(lib.nn.Parameter(lib.tensor([[1.0], [-2.0]]), requires_grad=False)),
        )

    got, expected = run_both(torch, snippet)
    assert got[0].startswith("Parameter containing:\n")
    assert got == expected


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_parameter_copies_stay_parameters(torch, requires_grad, how):
    def snippet(lib, dev):
        p = lib.nn.Parameter(lib.tensor([[1.0, -2.0], [0.5, 4.0]]), requires_grad=requires_grad)
        q = copy.deepcopy(p) if how == "deepcopy" else pickle.loads(pickle.dumps(p))
        with lib.no_grad():
            q.add_(1.0)
        return type(q).__name__, q.requires_grad, q.is_leaf, p.tolist(), q.tolist(), dtype_name(q)

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[:3] == ("Parameter", requires_grad, True)
    assert got[3] == [[1.0, -2.0], [0.5, 4.0]]


def test_deepcopy_of_a_module_gives_independent_parameters(torch, device):
    def snippet(lib, dev):
        net = make_classes(lib, dev).Net()
        twin = copy.deepcopy(net)
        x = inputs(lib, dev)
        same_out = np.array_equal(to_numpy(net(x)), to_numpy(twin(x)))
        pairs = list(zip(net.parameters(), twin.parameters()))
        with lib.no_grad():
            for p in twin.parameters():
                p.mul_(0.0)
            twin.head.scale.add_(1.0)
        return (
            same_out,
            [a is b for a, b in pairs],
            [type(b).__name__ for _, b in pairs],
            [b.requires_grad for _, b in pairs],
            names_of(twin.named_parameters()),
            list(twin.state_dict()),
            net(x),
            [float(np.abs(to_numpy(a)).sum()) > 0 for a, _ in pairs],
            to_numpy(net.head.scale).tolist(),
        )

    got, expected = run_both(torch, snippet, device)
    assert got[:6] == expected[:6]
    assert got[0] is True and not any(got[1]) and all(got[7])
    assert_close(got[6], expected[6])
    assert got[8] == expected[8]


def test_deepcopy_of_a_module_keeps_sharing_inside_the_copy(torch):
    def snippet(lib, dev):
        twin = copy.deepcopy(make_classes(lib).Tied())
        return twin.a is twin.b, twin.shared is twin.a.weight, names_of(twin.named_parameters())

    got, expected = run_both(torch, snippet)
    assert got == expected
    assert got[:2] == (True, True)


# ------------------------------------------------------------------------------------------------------ summary


def summary_model():
    classes = make_classes(trainkit)
    model = trainkit.nn.Sequential(classes.Lin(4, 3), classes.Act(), classes.Norm(3), classes.Lin(3, 2))
    return model


def test_summary_lists_each_leaf_layer_with_shapes_and_counts():
    model = summary_model()
    lines = trainkit.nn.summary(model, (4,), print_fn=None).splitlines()
    rows = {line.split()[0]: line for line in lines if line[:1].isdigit()}
    assert list(rows) == ["0", "1", "2", "3"]
    assert "(Lin)" in rows["0"] and "[1, 3]" in rows["0"] and rows["0"].split()[-1] == "15"
    assert "(Act)" in rows["1"] and "[1, 3]" in rows["1"] and rows["1"].split()[-1] == "0"
    assert "(Norm)" in rows["2"] and "[1, 3]" in rows["2"] and rows["2"].split()[-1] == "0"
    assert "(Lin)" in rows["3"] and "[1, 2]" in rows["3"] and rows["3"].split()[-1] == "8"
    assert "Total params: 23" in lines
    assert "Trainable params: 23" in lines
    assert "Non-trainable params: 0" in lines


def test_summary_uses_batch_size_and_nested_names():
    net = make_classes(trainkit).Net()
    table = trainkit.summary(net, (4,), batch_size=7, print_fn=None)
    assert "block.fc1 (Lin)" in table and "[7, 3]" in table
    assert "head (Lin)" in table and "[7, 2]" in table
    assert "block (Block)" not in table
    expected_total = sum(p.numel() for p in net.parameters())
    assert f"Total params: {expected_total}" in table


def test_summary_splits_trainable_and_frozen():
    model = summary_model()
    model[3].requires_grad_(False)
    table = trainkit.nn.summary(model, (4,), print_fn=None)
    assert "Total params: 23" in table
    assert "Trainable params: 15" in table
    assert "Non-trainable params: 8" in table


def test_summary_counts_shared_parameters_once():
    tied = make_classes(trainkit).Tied()
    table = trainkit.nn.summary(tied, (2,), print_fn=None)
    assert "Total params: 12" in table


def test_module_summary_method_matches_function_and_prints():
    model = summary_model()
    printed = []
    table = model.summary((4,), print_fn=printed.append)
    assert printed == [table]
    assert table == trainkit.nn.summary(model, (4,), print_fn=None)


@pytest.mark.parametrize("flags", ["train", "eval", "mixed"])
def test_summary_restores_every_training_flag(flags):
    model = summary_model()
    if flags == "eval":
        model.eval()
    elif flags == "mixed":
        model[2].eval()
    before = [m.training for m in model.modules()]
    model.summary((4,), print_fn=None)
    assert [m.training for m in model.modules()] == before


def test_summary_runs_in_eval_mode_without_grad_and_removes_its_hooks():
    model = summary_model()
    seen = []
    model[0].register_forward_hook(lambda m, a, o: seen.append((m.training, o.requires_grad)))
    model.summary((4,), print_fn=None)
    assert seen == [(False, False)]
    seen.clear()
    model(trainkit.zeros(2, 4))
    assert seen == [(True, True)]
    assert len(model[0]._forward_hooks) == 1
