"""trainkit.data against torch.utils.data: datasets, samplers, loaders, collation, splits, file loaders."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd.tensor import Tensor
from trainkit.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    load_csv,
    load_npz,
    random_split,
    regression_curve,
)


def data_of(lib):
    """The data package of either library."""
    return trainkit.data if lib is trainkit else lib.utils.data


def labels(loader) -> list[list[int]]:
    """The label batches of a loader over ``indexed(n)``: which samples each batch held."""
    return [y.tolist() for _, y in loader]


def indexed(n: int, lib=trainkit) -> TensorDataset:
    """Samples (row of features, its index), so batches show which samples they hold."""
    x = lib.arange(n * 2, dtype=lib.float32).reshape(n, 2)
    return data_of(lib).TensorDataset(x, lib.arange(n))


# ------------------------------------------------------------------------------------------------- datasets
def test_tensor_dataset_matches_torch(torch):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    ours = TensorDataset(trainkit.tensor(x), trainkit.arange(6))
    ref = torch.utils.data.TensorDataset(torch.tensor(x), torch.arange(6))
    assert len(ours) == len(ref) == 6
    for i in (0, 3, -1):
        for a, b in zip(ours[i], ref[i]):
            np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


def test_tensor_dataset_size_mismatch(torch):
    got, _ = assert_same_error(
        torch, lambda lib, dev: data_of(lib).TensorDataset(lib.zeros(3, 2), lib.zeros(4)), "Size mismatch"
    )
    assert "[3, 4]" in str(got)


def test_dataset_is_abstract(torch):
    assert_same_error(torch, lambda lib, dev: data_of(lib).Dataset()[0], "should implement __getitem__")
    with pytest.raises(NotImplementedError):
        len(Dataset())


def test_subset_and_concat(torch):
    for lib in (trainkit, torch):
        data = data_of(lib)
        sub = data.Subset(list(range(10)), [7, 2, 5])
        assert (len(sub), sub[0], sub[-1]) == (3, 7, 5)
        cat = data.ConcatDataset([range(3), range(10, 14)])
        assert (len(cat), cat[2], cat[3], cat[-1], cat[-7]) == (7, 2, 10, 13, 0)
    assert_same_error(torch, lambda lib, dev: data_of(lib).ConcatDataset([range(3)])[-4], "should not exceed")
    assert_same_error(torch, lambda lib, dev: data_of(lib).ConcatDataset([]), "empty iterable")


def test_add_concatenates():
    joined = indexed(3) + indexed(2)
    assert isinstance(joined, ConcatDataset)
    assert [int(joined[i][1]) for i in range(len(joined))] == [0, 1, 2, 0, 1]


# ------------------------------------------------------------------------------------------------- samplers
def test_samplers_match_torch(torch):
    assert list(SequentialSampler(range(4))) == list(torch.utils.data.SequentialSampler(range(4)))
    for drop_last in (False, True):
        ours = BatchSampler(SequentialSampler(range(10)), 3, drop_last)
        ref = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), 3, drop_last)
        assert list(ours) == list(ref) and len(ours) == len(ref)


def test_random_sampler():
    g = trainkit.Generator().manual_seed(0)
    sampler = RandomSampler(range(6), generator=g)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(6)) and first != second
    more = list(RandomSampler(range(4), num_samples=10, generator=g))
    assert len(more) == 10 and sorted(more[:4]) == sorted(more[4:8]) == [0, 1, 2, 3]
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) == {0, 1, 2}


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda data: data.BatchSampler(range(3), 0, False), ["batch_size should be a positive integer"]),
        (lambda data: data.BatchSampler(range(3), True, False), ["batch_size should be a positive integer"]),
        (lambda data: data.BatchSampler(range(3), 2, 1), ["drop_last should be a boolean"]),
        (lambda data: data.RandomSampler(range(3), replacement=1), ["replacement should be a boolean"]),
        (lambda data: data.RandomSampler(range(3), num_samples=0), ["num_samples should be a positive integer"]),
        (lambda data: data.RandomSampler([]), ["num_samples should be a positive integer"]),
    ],
)
def test_sampler_errors(torch, make, words):
    assert_same_error(torch, lambda lib, dev: make(data_of(lib)), *words)


# ------------------------------------------------------------------------------------------------- loader
@pytest.mark.parametrize(
    "n, batch_size, drop_last",
    [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False), (2, 5, True), (7, 1, False)],
)
def test_len_and_batches_match_torch(torch, n, batch_size, drop_last):
    ours = DataLoader(indexed(n), batch_size=batch_size, drop_last=drop_last)
    ref = torch.utils.data.DataLoader(indexed(n, torch), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(ref)
    got, want = list(ours), list(ref)
    assert len(got) == len(want) == len(ours)
    for (x, y), (tx, ty) in zip(got, want):
        np.testing.assert_array_equal(to_numpy(x), to_numpy(tx))
        np.testing.assert_array_equal(to_numpy(y), to_numpy(ty))
        assert x.dtype == trainkit.float32 and y.dtype == trainkit.int64


def test_batches_are_lists_of_tensors_as_torch(torch):
    ours = next(iter(DataLoader(indexed(4), batch_size=2)))
    ref = next(iter(torch.utils.data.DataLoader(indexed(4, torch), batch_size=2)))
    assert type(ours) is type(ref) is list and isinstance(ours[0], Tensor)


def test_shuffle_reshuffles_each_epoch():
    loader = DataLoader(indexed(20), batch_size=6, shuffle=True, generator=trainkit.Generator().manual_seed(0))
    epochs = [sum(labels(loader), []) for _ in range(3)]
    for order in epochs:
        assert sorted(order) == list(range(20))
    assert epochs[0] != epochs[1] != epochs[2]
    assert [len(b) for b in labels(loader)] == [6, 6, 6, 2]


def test_same_seed_same_order():
    def orders(make_generator):
        loader = DataLoader(indexed(30), batch_size=4, shuffle=True, generator=make_generator())
        return [labels(loader) for _ in range(2)]

    assert orders(lambda: trainkit.Generator().manual_seed(7)) == orders(lambda: trainkit.Generator().manual_seed(7))
    assert orders(lambda: trainkit.Generator().manual_seed(7)) != orders(lambda: trainkit.Generator().manual_seed(8))

    def global_orders(seed):
        trainkit.manual_seed(seed)
        loader = DataLoader(indexed(30), batch_size=4, shuffle=True)
        return [labels(loader) for _ in range(2)]

    first = global_orders(3)
    assert first == global_orders(3) and first[0] != first[1]


def test_global_stream_drawn_once_per_epoch():
    # the order is fixed when iteration starts, whatever else draws from the stream during the epoch
    trainkit.manual_seed(0)
    loader = DataLoader(indexed(12), batch_size=4, shuffle=True)
    order = []
    for _, y in loader:
        order.append(y.tolist())
        trainkit.rand(5)
    trainkit.manual_seed(0)
    assert labels(loader) == order


def test_shuffle_with_drop_last():
    loader = DataLoader(indexed(10), batch_size=4, shuffle=True, drop_last=True)
    batches = labels(loader)
    assert len(loader) == len(batches) == 2 and all(len(b) == 4 for b in batches)


def test_sampler_argument(torch):
    loader = DataLoader(indexed(6), batch_size=2, sampler=[5, 4, 3, 0])
    assert labels(loader) == [[5, 4], [3, 0]] and len(loader) == 2
    assert_same_error(
        torch,
        lambda lib, dev: data_of(lib).DataLoader(range(3), sampler=[0], shuffle=True),
        "mutually exclusive with shuffle",
    )
    assert_same_error(
        torch,
        lambda lib, dev: data_of(lib).DataLoader(range(3), batch_size=0),
        "batch_size should be a positive integer",
    )


def test_batch_size_none_yields_samples(torch):
    ours = list(DataLoader([1.5, 2.5], batch_size=None))
    ref = list(torch.utils.data.DataLoader([1.5, 2.5], batch_size=None))
    assert ours == ref == [1.5, 2.5]
    assert_same_error(
        torch,
        lambda lib, dev: data_of(lib).DataLoader(range(3), batch_size=None, drop_last=True),
        "mutually exclusive with drop_last",
    )


def test_generic_dataset_and_collate_fn():
    class Pairs(Dataset):
        def __getitem__(self, i):
            return np.full(3, i, dtype=np.float32), i

        def __len__(self):
            return 5

    x, y = next(iter(DataLoader(Pairs(), batch_size=4)))
    assert x.shape == (4, 3) and x.dtype == trainkit.float32 and y.tolist() == [0, 1, 2, 3]
    sums = list(DataLoader(Pairs(), batch_size=2, collate_fn=lambda batch: sum(i for _, i in batch)))
    assert sums == [1, 5, 4]


# ------------------------------------------------------------------------------------------------- fast path
def count_getitem(monkeypatch) -> list[int]:
    """Count tensor indexing calls from here on."""
    calls = [0]
    original = Tensor.__getitem__

    def counted(self, key):
        calls[0] += 1
        return original(self, key)

    monkeypatch.setattr(Tensor, "__getitem__", counted)
    return calls


@pytest.mark.parametrize("shuffle, drop_last", [(False, False), (True, False), (True, True)])
def test_fast_path_same_batches_as_generic_path(device, shuffle, drop_last):
    x = trainkit.randn(23, 3, 2, device=device)
    ds = TensorDataset(x, trainkit.arange(23, device=device), (x[:, 0, 0] > 0))

    def batches(collate_fn):
        g = trainkit.Generator().manual_seed(5)
        return list(
            DataLoader(ds, batch_size=5, shuffle=shuffle, drop_last=drop_last, generator=g, collate_fn=collate_fn)
        )

    fast, generic = batches(None), batches(default_collate)
    assert len(fast) == len(generic) == (4 if drop_last else 5)
    for a, b in zip(fast, generic):
        assert len(a) == len(b) == 3
        for ta, tb in zip(a, b):
            assert ta.dtype == tb.dtype and ta.device == tb.device and ta.device.type == device
            np.testing.assert_array_equal(to_numpy(ta), to_numpy(tb))


def test_fast_path_indexes_once_per_batch(monkeypatch):
    ds = indexed(10)
    calls = count_getitem(monkeypatch)
    assert len(list(DataLoader(ds, batch_size=4))) == 3
    assert calls[0] == 3 * 2  # one lookup per tensor per batch
    calls[0] = 0
    list(DataLoader(ds, batch_size=4, collate_fn=default_collate))
    assert calls[0] == 10 * 2  # the generic path: one per tensor per sample


def test_fast_path_through_random_split_subsets(monkeypatch):
    train, val = random_split(indexed(12), [8, 4], generator=trainkit.Generator().manual_seed(0))
    inner = Subset(train, [6, 0, 3])
    expected = [[train.indices[6], train.indices[0]], [train.indices[3]]]
    calls = count_getitem(monkeypatch)
    assert labels(DataLoader(inner, batch_size=2)) == expected
    assert calls[0] == 2 * 2
    assert labels(DataLoader(val, batch_size=4)) == [val.indices]


def test_subclass_getitem_is_respected():
    class Doubled(TensorDataset):
        def __getitem__(self, i):
            return tuple(t[i] * 2 for t in self.tensors)

    assert labels(DataLoader(Doubled(*indexed(4).tensors), batch_size=4)) == [[0, 2, 4, 6]]


def test_fast_path_keeps_autograd():
    x = trainkit.randn(6, 2, requires_grad=True)
    (xb,) = next(iter(DataLoader(TensorDataset(x), batch_size=3)))
    xb.sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[1, 1]] * 3 + [[0, 0]] * 3)


# ------------------------------------------------------------------------------------------------- collate
def collate_both(torch, batch_of):
    """default_collate of the same samples in each library (``batch_of(lib)`` builds them)."""
    return default_collate(batch_of(trainkit)), torch.utils.data.default_collate(batch_of(torch))


def assert_same_structure(ours, ref):
    if hasattr(ref, "numpy"):
        assert isinstance(ours, Tensor) and str(ours.dtype) == str(ref.dtype).replace("torch.", "trainkit.")
        np.testing.assert_array_equal(to_numpy(ours), to_numpy(ref))
    elif isinstance(ref, dict):
        assert type(ours) is type(ref) and list(ours) == list(ref)
        for key in ref:
            assert_same_structure(ours[key], ref[key])
    elif isinstance(ref, (list, tuple)):
        assert type(ours).__name__ == type(ref).__name__ and len(ours) == len(ref)
        for a, b in zip(ours, ref):
            assert_same_structure(a, b)
    else:
        assert ours == ref


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "batch_of",
    [
        lambda lib: [(lib.ones(2), 1), (lib.zeros(2), 2)],
        lambda lib: [{"x": lib.ones(2, 2), "label": 0, "name": "a"}, {"x": lib.zeros(2, 2), "label": 1, "name": "b"}],
        lambda lib: [[1.5, True], [2.5, False]],
        lambda lib: [(np.ones(3, dtype=np.float64), np.int32(4)), (np.zeros(3, dtype=np.float64), np.int32(5))],
        lambda lib: [np.float32(1.0), np.float32(2.0)],
        lambda lib: [{"pair": (lib.ones(1), {"deep": 3.0})}, {"pair": (lib.zeros(1), {"deep": 4.0})}],
        lambda lib: [Point(1, 2.0), Point(3, 4.0)],
    ],
    ids=["tuple", "dict", "list-of-numbers", "numpy", "numpy-scalars", "nested", "namedtuple"],
)
def test_collate_matches_torch(torch, batch_of):
    assert_same_structure(*collate_both(torch, batch_of))


def test_collate_errors(torch):
    assert_same_error(torch, lambda lib, dev: data_of(lib).default_collate([[1, 2], [3]]), "equal size")
    assert_same_error(torch, lambda lib, dev: data_of(lib).default_collate([object()]), "default_collate")
    assert_same_error(torch, lambda lib, dev: data_of(lib).default_collate([np.array(["a"])]), "default_collate")


# ------------------------------------------------------------------------------------------------- random_split
@pytest.mark.parametrize(
    "n, lengths",
    [
        (10, [3, 7]),
        (10, [0.3, 0.7]),
        (10, [0.5, 0.5]),
        (30, [0.3, 0.3, 0.4]),
        (11, [0.5, 0.5]),
        (7, [0.25, 0.25, 0.25, 0.25]),
        (101, [0.8, 0.1, 0.1]),
        (5, [1.0]),
        (3, [0, 3]),
    ],
)
def test_random_split_sizes_match_torch(torch, n, lengths):
    parts = random_split(range(n), lengths, generator=trainkit.Generator().manual_seed(0))
    ref = torch.utils.data.random_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in ref]
    assert all(isinstance(p, Subset) for p in parts)
    assert sorted(i for p in parts for i in p) == list(range(n))


def test_random_split_seeds():
    def split(seed=None):
        g = None if seed is None else trainkit.Generator().manual_seed(seed)
        return [p.indices for p in random_split(range(20), [10, 10], generator=g)]

    assert split(1) == split(1) != split(2)
    trainkit.manual_seed(4)
    first = split()
    trainkit.manual_seed(4)
    assert split() == first


def test_random_split_zero_length_warns(torch):
    messages = []
    for lib in (trainkit, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data_of(lib).random_split(range(2), [0.9, 0.05, 0.05])
        messages.append([str(w.message) for w in caught])
    assert messages[0] == messages[1] and len(messages[0]) == 2
    assert "Length of split at index 1 is 0" in messages[0][0]


@pytest.mark.parametrize(
    "lengths, words",
    [
        ([3, 6], ["Sum of input lengths does not equal"]),
        ([0.5, 0.4], ["Sum of input lengths does not equal"]),
        ([0.6, 0.6], ["Sum of input lengths does not equal"]),
        ([1.5, -0.5], ["Fraction at index 0 is not between 0 and 1"]),
    ],
)
def test_random_split_errors(torch, lengths, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same_error(torch, lambda lib, dev: data_of(lib).random_split(range(10), lengths), *words)


# ------------------------------------------------------------------------------------------------- files
def test_load_npz(tmp_path):
    path = tmp_path / "d.npz"
    x, y = np.random.default_rng(0).normal(size=(6, 3)), np.arange(6)
    np.savez(path, x=x, y=y, extra=np.zeros(2))
    ds = load_npz(path)
    # floating arrays take dtype; integer ones (class labels) stay integers, as int64
    assert len(ds) == 6 and ds.tensors[0].dtype == trainkit.float32 and ds.tensors[1].dtype == trainkit.int64
    np.testing.assert_allclose(to_numpy(ds.tensors[0]), x.astype(np.float32))
    kept = load_npz(path, dtype=None)
    assert kept.tensors[0].dtype == trainkit.float64 and kept.tensors[1].dtype == trainkit.int64
    (only,) = load_npz(path, inputs="y", targets=None).tensors
    assert only.shape == (6,)
    np.savez(tmp_path / "named.npz", features=x, labels=y)
    assert len(load_npz(tmp_path / "named.npz", inputs="features", targets="labels")) == 6


def test_load_npz_errors(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, features=np.zeros((3, 2)), y=np.zeros(3))
    with pytest.raises(KeyError, match="no array 'x'") as err:
        load_npz(path)
    assert str(path) in str(err.value) and "'features'" in str(err.value)
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_npz(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(ValueError, match="text.npz"):
        load_npz(tmp_path / "text.npz")
    np.save(tmp_path / "single.npy", np.zeros(3))
    with pytest.raises(ValueError, match="single array"):
        load_npz(tmp_path / "single.npy")
    np.savez(tmp_path / "uneven.npz", x=np.zeros((3, 2)), y=np.zeros(4))
    with pytest.raises(ValueError, match="same number of rows") as err:
        load_npz(tmp_path / "uneven.npz")
    assert "uneven.npz" in str(err.value) and "'y': 4" in str(err.value)


def test_load_csv(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a, b,label\n1,2,0\n3.5,-4,1\n\n5,6e-1,1\n")
    x, y = load_csv(path, inputs=["a", "b"], targets=["label"]).tensors
    assert x.dtype == y.dtype == trainkit.float32 and x.shape == (3, 2) and y.shape == (3, 1)
    np.testing.assert_allclose(to_numpy(x), [[1, 2], [3.5, -4], [5, 0.6]], rtol=1e-6)
    np.testing.assert_array_equal(to_numpy(y), [[0], [1], [1]])
    (b_only,) = load_csv(path, inputs="b", dtype="float64").tensors
    assert b_only.dtype == trainkit.float64 and b_only.shape == (3, 1)
    (tmp_path / "semi.csv").write_text("p;q\n1;2\n")
    x, y = load_csv(tmp_path / "semi.csv", inputs=["q"], targets=["p"], delimiter=";").tensors
    assert x.tolist() == [[2.0]] and y.tolist() == [[1.0]]
    (tmp_path / "header_only.csv").write_text("a,b\n")
    assert len(load_csv(tmp_path / "header_only.csv", inputs=["a"], targets=["b"])) == 0


def test_load_csv_errors(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n1,2,0\n")
    with pytest.raises(KeyError, match="no column 'c'") as err:
        load_csv(path, inputs=["a", "c"], targets=["label"])
    assert str(path) in str(err.value) and "'a', 'b', 'label'" in str(err.value)
    with pytest.raises(KeyError, match="'target'"):
        load_csv(path, inputs=["a"], targets=["target"])
    with pytest.raises(FileNotFoundError):
        load_csv(tmp_path / "missing.csv", inputs=["a"])
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3,oops\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 3, column 'b': 'oops' is not a number"):
        load_csv(tmp_path / "bad.csv", inputs=["a", "b"])
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match="ragged.csv, line 3: 1 fields"):
        load_csv(tmp_path / "ragged.csv", inputs=["a"])
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty.csv: empty file"):
        load_csv(tmp_path / "empty.csv", inputs=["a"])


# ------------------------------------------------------------------------------------------------- synthetic
def test_regression_curve(torch):
    x, y = regression_curve(seed=0).tensors
    assert x.shape == y.shape == (100, 1) and x.dtype == y.dtype == trainkit.float32
    # within one float32 step: trainkit.linspace rounds from float64, torch computes in float32
    np.testing.assert_allclose(to_numpy(x), to_numpy(torch.unsqueeze(torch.linspace(-1, 1, 100), dim=1)), atol=1e-7)
    residual = to_numpy(y - x**2)
    assert 0.05 < residual.std() < 0.15 and abs(residual.mean()) < 0.05


def test_regression_curve_determinism():
    def ys(**kwargs):
        return to_numpy(regression_curve(50, **kwargs).tensors[1])

    np.testing.assert_array_equal(ys(seed=3), ys(seed=3))
    assert not np.array_equal(ys(seed=3), ys(seed=4))
    trainkit.manual_seed(1)
    first = ys()
    trainkit.manual_seed(1)
    np.testing.assert_array_equal(ys(), first)
    x, y = regression_curve(7, noise=0.0).tensors
    assert len(x) == 7
    np.testing.assert_array_equal(to_numpy(y), to_numpy(x) ** 2)
