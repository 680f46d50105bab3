"""Same seed, same numbers as PyTorch on the CPU: every sampler, across the sizes where PyTorch changes its
algorithm (below and above 16 elements, odd lengths, 0-d, empty), float32 and float64, several seeds; the generator
state's bytes, which each library loads from the other; dropout masks, layer initialisation and data shuffling.

Everything must be equal, bit for bit: integers, permutations, masks and floats (on x86, where PyTorch's float32
normal fill runs the vectorised code trainkit follows; elsewhere float32 normals may differ in the last bit)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd.creation import normal, randint_like
from trainkit.autograd.distributions import VECTORISED_NORMAL
from trainkit.autograd.ops.sampling import bernoulli
from trainkit.autograd.random import fork_rng, get_rng_state, set_rng_state

SEEDS = [0, 7, 2024]
SIZES = [(), (0,), (1,), (2,), (3,), (15,), (16,), (17,), (31,), (33,), (4, 5), (7, 9), (1000,)]
DTYPES = ["float32", "float64"]


def both(torch, seed, fn_t, fn_torch):
    """(trainkit's result, torch's result) after seeding both with ``seed``; the streams must end in step."""
    trainkit.manual_seed(seed)
    a = fn_t()
    torch.manual_seed(seed)
    b = fn_torch()
    np.testing.assert_array_equal(to_numpy(get_rng_state()), to_numpy(torch.get_rng_state()))
    return to_numpy(a), to_numpy(b)


def assert_float_parity(a, b, dtype):
    assert a.shape == b.shape and a.dtype == b.dtype
    if VECTORISED_NORMAL or dtype == "float64":
        np.testing.assert_array_equal(a, b)
    else:  # PyTorch's C library float32 functions against NumPy's
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


# -------------------------------------------------------------------------------------------------- the engine
@pytest.mark.parametrize("seed", [0, 1, 12345, 2**32 + 7, 2**63 + 5, -1])
def test_seeding_gives_torch_state_bytes(torch, seed):
    trainkit.manual_seed(seed)
    torch.manual_seed(seed)
    assert trainkit.initial_seed() == torch.initial_seed()
    np.testing.assert_array_equal(to_numpy(get_rng_state()), to_numpy(torch.get_rng_state()))
    for n in (1, 623, 5, 1300):  # across twists of the 624-word state
        trainkit.rand(n)
        torch.rand(n)
        np.testing.assert_array_equal(to_numpy(get_rng_state()), to_numpy(torch.get_rng_state()))


def test_state_loads_in_both_directions(torch):
    torch.manual_seed(3)
    torch.rand(100)
    torch.randn(1, dtype=torch.float64)  # leaves a cached normal in the state
    set_rng_state(torch.get_rng_state())
    np.testing.assert_array_equal(to_numpy(get_rng_state()), to_numpy(torch.get_rng_state()))
    np.testing.assert_array_equal(to_numpy(trainkit.randn(5)), to_numpy(torch.randn(5)))

    trainkit.manual_seed(11)
    trainkit.randint(0, 5, (77,))
    trainkit.randn(3)
    torch.set_rng_state(torch.from_numpy(to_numpy(get_rng_state()).copy()))
    np.testing.assert_array_equal(to_numpy(trainkit.randperm(50)), to_numpy(torch.randperm(50)))
    np.testing.assert_array_equal(to_numpy(trainkit.rand(20)), to_numpy(torch.rand(20)))


def test_generator_objects(torch):
    g, tg = trainkit.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    np.testing.assert_array_equal(to_numpy(g.get_state()), to_numpy(tg.get_state()))
    np.testing.assert_array_equal(to_numpy(trainkit.randn(40, generator=g)), to_numpy(torch.randn(40, generator=tg)))
    state = g.get_state()
    first = to_numpy(trainkit.rand(8, generator=g))
    g.set_state(state)
    np.testing.assert_array_equal(to_numpy(trainkit.rand(8, generator=g)), first)
    tg.set_state(torch.from_numpy(to_numpy(state).copy()))
    np.testing.assert_array_equal(to_numpy(torch.rand(8, generator=tg)), first)
    # a generator leaves the default stream alone
    trainkit.manual_seed(0)
    trainkit.rand(3, generator=g)
    torch.manual_seed(0)
    np.testing.assert_array_equal(to_numpy(trainkit.rand(3)), to_numpy(torch.rand(3)))
    s = g.seed()
    assert g.initial_seed() == s


def test_bad_states_are_refused_as_torch_refuses(torch):
    assert_same_error(torch, lambda lib, dev: lib.Generator().set_state(lib.zeros(10, dtype=lib.uint8)), "5056")
    with pytest.raises(TypeError, match="uint8"):
        trainkit.Generator().set_state(trainkit.zeros(5056))


def test_fork_rng_restores_the_stream(torch):
    trainkit.manual_seed(0)
    with fork_rng():
        trainkit.randn(100)
    torch.manual_seed(0)
    np.testing.assert_array_equal(to_numpy(trainkit.rand(4)), to_numpy(torch.rand(4)))


# ----------------------------------------------------------------------------------------- floating samplers
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_rand_and_randn(torch, size, dtype):
    for seed in SEEDS:
        a, b = both(
            torch, seed, lambda: trainkit.rand(size, dtype=dtype), lambda: torch.rand(size, dtype=getattr(torch, dtype))
        )
        np.testing.assert_array_equal(a, b)
        a, b = both(
            torch,
            seed,
            lambda: trainkit.randn(size, dtype=dtype),
            lambda: torch.randn(size, dtype=getattr(torch, dtype)),
        )
        assert_float_parity(a, b, dtype)


def test_small_normals_share_the_cached_partner(torch):
    """Fewer than 16 elements draw Box-Muller pairs one element at a time; the second of a pair waits in the
    generator for the next such draw, also across calls and dtypes."""
    sizes = [3, 5, 1, 20, 2, 1, 17]

    def run(lib):
        return [to_numpy(lib.randn(n, dtype=lib.float32 if i % 2 else lib.float64)) for i, n in enumerate(sizes)]

    trainkit.manual_seed(4)
    ours = run(trainkit)
    torch.manual_seed(4)
    theirs = run(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(to_numpy(get_rng_state()), to_numpy(torch.get_rng_state()))  # the cached one


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 15, 16, 17, 100])
def test_uniform_normal_exponential_fills(torch, n, dtype):
    tdt = getattr(torch, dtype)
    for seed in SEEDS:
        a, b = both(
            torch,
            seed,
            lambda: trainkit.empty(n, dtype=dtype).uniform_(-0.3, 0.7),
            lambda: torch.empty(n, dtype=tdt).uniform_(-0.3, 0.7),
        )
        np.testing.assert_array_equal(a, b)
        a, b = both(
            torch,
            seed,
            lambda: trainkit.empty(n, dtype=dtype).normal_(0.5, 2.5),
            lambda: torch.empty(n, dtype=tdt).normal_(0.5, 2.5),
        )
        assert_float_parity(a, b, dtype)
        a, b = both(
            torch,
            seed,
            lambda: trainkit.empty(n, dtype=dtype).exponential_(1.5),
            lambda: torch.empty(n, dtype=tdt).exponential_(1.5),
        )
        np.testing.assert_array_equal(a, b)


def test_normal_overloads(torch):
    mean, std = np.arange(20.0, dtype=np.float32).reshape(4, 5), np.full(5, 0.5, dtype=np.float32)
    cases = [
        (lambda lib: (lib.tensor(mean), lib.tensor(std))),
        (lambda lib: (lib.tensor(mean), 0.3)),
        (lambda lib: (1.5, lib.tensor(std))),
        (lambda lib: (2.0, 0.5, (3,))),
        (lambda lib: (2.0, 0.5, (40,))),
    ]
    for make in cases:
        a, b = both(torch, 0, lambda m=make: normal(*m(trainkit)), lambda m=make: torch.normal(*m(torch)))
        np.testing.assert_array_equal(a, b)
    assert_same_error(torch, lambda lib, dev: lib.normal(0.0, -1.0, (2,)) if lib is torch else normal(0.0, -1.0, (2,)))


# ------------------------------------------------------------------------------------------ integers and masks
@pytest.mark.parametrize("size", [(), (0,), (1,), (17,), (3, 4), (500,)])
def test_randint_narrow_and_wide(torch, size):
    for low, high in [(0, 10), (-5, 7), (0, 2**28 - 1), (0, 2**28), (0, 2**31), (-3, 2**40), (-(2**62), 2**62)]:
        for seed in SEEDS:
            a, b = both(
                torch,
                seed,
                lambda lo=low, hi=high: trainkit.randint(lo, hi, size),
                lambda lo=low, hi=high: torch.randint(lo, hi, size),
            )
            np.testing.assert_array_equal(a, b)
    a, b = both(
        torch,
        1,
        lambda: randint_like(trainkit.zeros(size, dtype=trainkit.int32), 2, 9),
        lambda: torch.randint_like(torch.zeros(size, dtype=torch.int32), 2, 9),
    )
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [0, 1, 2, 10, 1000])
def test_randperm(torch, n):
    for seed in SEEDS:
        a, b = both(torch, seed, lambda: trainkit.randperm(n), lambda: torch.randperm(n))
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "float32", "float64"])
def test_random_(torch, dtype):
    def run(lib, *args):
        return lambda: lib.zeros(50, dtype=getattr(lib, dtype)).random_(*args)

    for args in [(), (2,), (0, 2)] if dtype == "bool" else [(), (7,), (3, 9), (-2, 2**29)][: 3 + (dtype == "int64")]:
        a, b = both(torch, 2, run(trainkit, *args), run(torch, *args))
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("size", [(), (0,), (1,), (17,), (3, 40)])
def test_bernoulli(torch, size):
    for seed in SEEDS:
        for dtype in DTYPES:
            tdt = getattr(torch, dtype)
            a, b = both(
                torch,
                seed,
                lambda dt=dtype: trainkit.empty(size, dtype=dt).bernoulli_(0.3),
                lambda dt=tdt: torch.empty(size, dtype=dt).bernoulli_(0.3),
            )
            np.testing.assert_array_equal(a, b)
            p = np.linspace(0, 1, int(np.prod(size)), dtype=dtype).reshape(size)
            a, b = both(
                torch, seed, lambda p=p: bernoulli(trainkit.tensor(p)), lambda p=p: torch.bernoulli(torch.tensor(p))
            )
            np.testing.assert_array_equal(a, b)
            a, b = both(
                torch,
                seed,
                lambda p=p: trainkit.zeros(size).bernoulli_(trainkit.tensor(p)),
                lambda p=p: torch.zeros(size).bernoulli_(torch.tensor(p)),
            )
            np.testing.assert_array_equal(a, b)
    a, b = both(torch, 0, lambda: bernoulli(trainkit.ones(9), 0.25), lambda: torch.bernoulli(torch.ones(9), 0.25))
    np.testing.assert_array_equal(a, b)


def test_fill_errors_match_torch(torch):
    assert_same_error(torch, lambda lib, dev: lib.empty(3).uniform_(1, 0), "from=1 > to=0")
    assert_same_error(torch, lambda lib, dev: lib.empty(3).normal_(0, -1), "std >= 0.0")
    assert_same_error(torch, lambda lib, dev: lib.empty(3).bernoulli_(1.5), "[0, 1]")
    assert_same_error(torch, lambda lib, dev: lib.empty(3).exponential_(0), "lambda > 0.0")
    assert_same_error(torch, lambda lib, dev: lib.empty(3).random_(5, 2), "from=5 >= to=2")
    assert_same_error(torch, lambda lib, dev: lib.empty(3, dtype=lib.int64).uniform_(), "Long")
    assert_same_error(torch, lambda lib, dev: lib.randperm(-1), "negative dimension")
    assert_same_error(torch, lambda lib, dev: lib.zeros(2, requires_grad=True).uniform_(), "in-place")


def test_fills_record_their_node(torch):
    x = trainkit.zeros(3, requires_grad=True)
    for fill, name in [
        (lambda y: y.uniform_(), "UniformBackward0"),
        (lambda y: y.normal_(), "NormalBackward0"),
        (lambda y: y.exponential_(), "ExponentialBackward0"),
        (lambda y: y.bernoulli_(0.5), "BernoulliBackward2"),
    ]:
        y = fill(x * 1)
        assert type(y.grad_fn).__name__ == name
        y.sum().backward()
        np.testing.assert_array_equal(to_numpy(x.grad), np.zeros(3, dtype=np.float32))
        x.grad = None


# ---------------------------------------------------------------------------------- dropout, layers, data
@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_masks(torch, dtype):
    tdt = getattr(torch, dtype)
    for p in (0.1, 0.5, 0.8):
        for shape in [(1,), (17,), (8, 33)]:
            a, b = both(
                torch,
                p * 10,
                lambda p=p, s=shape: trainkit.nn.functional.dropout(trainkit.ones(s, dtype=dtype), p),
                lambda p=p, s=shape: torch.nn.functional.dropout(torch.ones(s, dtype=tdt), p),
            )
            np.testing.assert_array_equal(a, b)
        a, b = both(
            torch,
            3,
            lambda p=p: trainkit.nn.Dropout2d(p)(trainkit.ones(4, 6, 3, 3, dtype=dtype)),
            lambda p=p: torch.nn.Dropout2d(p)(torch.ones(4, 6, 3, 3, dtype=tdt)),
        )
        np.testing.assert_array_equal(a, b)


LAYERS = [
    ("Linear", (3, 4)),
    ("Linear", (20, 7)),
    ("Conv2d", (3, 8, 3)),
    ("Conv1d", (4, 6, 5)),
    ("Embedding", (10, 4)),
    ("LSTM", (4, 6, 2)),
    ("GRU", (5, 3)),
    ("MultiheadAttention", (8, 2)),
]


@pytest.mark.parametrize("name,args", LAYERS, ids=[f"{n}{a}" for n, a in LAYERS])
def test_default_initialisation(torch, name, args):
    trainkit.manual_seed(0)
    ours = getattr(trainkit.nn, name)(*args).state_dict()
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*args).state_dict()
    assert list(ours) == list(theirs)
    for key in theirs:
        # u * (b - a) + a: one rounding of the bound apart at most (nn.init rounds twice, PyTorch once)
        a, b = to_numpy(ours[key]), to_numpy(theirs[key])
        np.testing.assert_allclose(a, b, rtol=0, atol=4 * np.spacing(np.abs(b).max(initial=0)))
    np.testing.assert_array_equal(to_numpy(trainkit.rand(5)), to_numpy(torch.rand(5)))


def test_dataloader_shuffles_as_torch(torch):
    ours = trainkit.data.DataLoader(trainkit.data.TensorDataset(trainkit.arange(23)), batch_size=5, shuffle=True)
    theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(23)), batch_size=5, shuffle=True)
    trainkit.manual_seed(0)
    torch.manual_seed(0)
    for _ in range(3):
        assert [b[0].tolist() for b in ours] == [b[0].tolist() for b in theirs]
    np.testing.assert_array_equal(to_numpy(trainkit.rand(3)), to_numpy(torch.rand(3)))

    g, tg = trainkit.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    ours = trainkit.data.DataLoader(list(range(11)), batch_size=4, shuffle=True, generator=g)
    theirs = torch.utils.data.DataLoader(list(range(11)), batch_size=4, shuffle=True, generator=tg)
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


def test_samplers_and_random_split(torch):
    def sampler(lib, seed):
        return list(lib.utils.data.RandomSampler(range(7), True, 70, generator=lib.Generator().manual_seed(seed)))

    for seed in SEEDS:
        assert sampler(trainkit, seed) == sampler(torch, seed)
    for lengths in ([3, 7], [0.3, 0.7], [0.5, 0.25, 0.25]):
        ours = trainkit.data.random_split(range(10), lengths, generator=trainkit.Generator().manual_seed(42))
        theirs = torch.utils.data.random_split(range(10), lengths, generator=torch.Generator().manual_seed(42))
        assert [list(s.indices) for s in ours] == [list(s.indices) for s in theirs]
    trainkit.manual_seed(1)
    torch.manual_seed(1)
    ours = trainkit.data.random_split(range(30), [10, 20])
    theirs = torch.utils.data.random_split(range(30), [10, 20])
    assert list(ours[0].indices) == list(theirs[0].indices)


def test_large_randn_is_fast_enough_and_exact(torch):
    a, b = both(torch, 0, lambda: trainkit.randn(1_000_003), lambda: torch.randn(1_000_003))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,replacement", [(1, False), (1, True), (3, False), (7, False), (5, True), (50, True)])
def test_multinomial(torch, dtype, n, replacement):
    for seed in SEEDS:
        w = np.random.default_rng(seed).random((3, 7)).astype(dtype)
        w[0, 2] = 0
        for rows in (w, w[1]):
            a, b = both(
                torch,
                seed,
                lambda r=rows: trainkit.multinomial(trainkit.tensor(r), n, replacement),
                lambda r=rows: torch.multinomial(torch.tensor(r), n, replacement),
            )
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_like_functions_take_the_input_shape_dtype_and_a_generator(torch, dtype):
    x = np.zeros((3, 7), dtype=dtype)
    g, tg = trainkit.Generator(device="cpu").manual_seed(1), torch.Generator(device="cpu").manual_seed(1)
    for name in ("rand_like", "randn_like"):
        a = to_numpy(getattr(trainkit, name)(trainkit.tensor(x), generator=g))
        b = to_numpy(getattr(torch, name)(torch.tensor(x), generator=tg))
        assert_float_parity(a, b, dtype)
    a = to_numpy(randint_like(trainkit.tensor(x), 3, 11, generator=g))
    np.testing.assert_array_equal(a, to_numpy(torch.randint_like(torch.tensor(x), 3, 11, generator=tg)))


VIEWS = {
    "transposed": lambda lib: lib.empty(3, 40).t(),
    "strided": lambda lib: lib.empty(3, 40)[:, ::2],
    "permuted": lambda lib: lib.empty(2, 3, 5).permute(2, 0, 1),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_fills_of_views_follow_memory_order(torch, view):
    """PyTorch fills a view in the order of its memory; a non-contiguous one draws its normals one by one."""
    p = np.random.default_rng(0).random(tuple(VIEWS[view](torch).shape)).astype(np.float32)
    for fill, args in [("uniform_", ()), ("normal_", ()), ("exponential_", ()), ("bernoulli_", (0.3,))]:
        a, b = both(
            torch,
            0,
            lambda f=fill, a=args: getattr(VIEWS[view](trainkit), f)(*a),
            lambda f=fill, a=args: getattr(VIEWS[view](torch), f)(*a),
        )
        assert_float_parity(a, b, "float32")
    a, b = both(
        torch,
        1,
        lambda: VIEWS[view](trainkit).bernoulli_(trainkit.tensor(p)),
        lambda: VIEWS[view](torch).bernoulli_(torch.tensor(p)),
    )
    np.testing.assert_array_equal(a, b)


def test_streams_repeat_with_a_seed_on_every_device(device):
    """On a GPU the numbers are CuPy's own, not PyTorch's: a seed still repeats them, and every fill works."""

    def draws():
        trainkit.manual_seed(5)
        x = trainkit.empty(40, device=device)
        return [
            to_numpy(t)
            for t in (
                trainkit.rand(7, device=device),
                trainkit.randn(30, device=device),
                trainkit.randint(0, 9, (6,), device=device),
                trainkit.randperm(8, device=device),
                x.uniform_(-1, 1),
                x.normal_(2, 3),
                x.exponential_(),
                x.bernoulli_(0.4),
                trainkit.nn.functional.dropout(trainkit.ones(50, device=device), 0.5),
                trainkit.multinomial(trainkit.ones(6, device=device), 3),
            )
        ]

    for a, b in zip(draws(), draws()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", SEEDS)
def test_subset_and_weighted_samplers(torch, seed):
    from trainkit.data.dataloader import SubsetRandomSampler, WeightedRandomSampler

    def g(lib):
        return lib.Generator().manual_seed(seed)

    indices = [3, 5, 8, 13, 21, 34]
    assert list(SubsetRandomSampler(indices, g(trainkit))) == list(
        torch.utils.data.SubsetRandomSampler(indices, g(torch))
    )
    weights = [0.1, 0.5, 2.0, 0.0, 1.0]
    for n, replacement in ((40, True), (3, False)):
        ours = WeightedRandomSampler(weights, n, replacement, generator=g(trainkit))
        theirs = torch.utils.data.WeightedRandomSampler(weights, n, replacement, generator=g(torch))
        assert list(ours) == list(theirs) and len(ours) == n
