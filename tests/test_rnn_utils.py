"""trainkit.nn.utils.rnn against torch.nn.utils.rnn: PackedSequence, packing and padding of variable-length
batches (sorted, unsorted, batch_first, padding values and sides, total_length), gradients through every
function and through pack -> pad round trips, gradcheck and gradgradcheck, and the errors torch raises."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit.autograd import gradcheck, gradgradcheck
from trainkit.nn.utils import rnn as tk_rnn

DTYPES = ["float32", "float64"]
TOL = {"float32": 1e-6, "float64": 1e-12}

# (lengths, time steps of the padded input): sorted, ties, unsorted, one sequence, all full, shorter than T
LENGTH_CASES = [
    ([5, 3, 2], 5),
    ([4, 4, 1, 1], 6),
    ([1], 1),
    ([3], 4),
    ([2, 2, 2], 2),
    ([2, 5, 3, 5, 1], 5),
    ([1, 2, 3, 4], 4),
    ([3, 1, 3, 2, 2, 1, 3], 3),
]


def _lib_rnn(lib):
    return tk_rnn if lib is trainkit else lib.nn.utils.rnn


def _pair(torch, array, requires_grad=False):
    """The same values as a trainkit tensor and a torch tensor."""
    ours = trainkit.tensor(array, requires_grad=requires_grad)
    theirs = torch.tensor(array, requires_grad=requires_grad)
    return ours, theirs


def _same(ours, theirs, tol=1e-12):
    assert tuple(ours.shape) == tuple(theirs.shape), (tuple(ours.shape), tuple(theirs.shape))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=tol, atol=tol)


def _same_packed(ours, theirs, tol=1e-12):
    assert isinstance(ours, tk_rnn.PackedSequence)
    _same(ours.data, theirs.data, tol)
    _same(ours.batch_sizes, theirs.batch_sizes)
    for name in ("sorted_indices", "unsorted_indices"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None) == (b is None), name
        if a is not None:
            _same(a, b)


# --- PackedSequence -------------------------------------------------------------------------------------------


def test_packed_sequence_is_a_named_tuple_as_torch(torch):
    data = trainkit.tensor([1.0, 2.0, 3.0])
    packed = tk_rnn.PackedSequence(data, trainkit.tensor([2, 1]), trainkit.tensor([1, 0]))
    ref = torch.nn.utils.rnn.PackedSequence(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2, 1]), torch.tensor([1, 0]))
    assert isinstance(packed, tuple) and packed._fields == ref._fields
    _same_packed(packed, ref)
    d, b, s, u = packed
    assert d is data and s.tolist() == [1, 0] and u.tolist() == [1, 0]
    pair = tk_rnn.PackedSequence((data, trainkit.tensor([2, 1])))
    assert pair.sorted_indices is None and pair.unsorted_indices is None and pair.batch_sizes.tolist() == [2, 1]
    perm = tk_rnn.PackedSequence(data, trainkit.tensor([2, 1]), trainkit.tensor([2, 0, 1]))
    assert perm.unsorted_indices.tolist() == [1, 2, 0]
    assert "unsorted_indices=" in repr(packed)


def test_packed_sequence_conversions():
    packed = tk_rnn.pack_sequence([trainkit.ones(3, 2), trainkit.ones(1, 2)], enforce_sorted=False)
    assert packed.to(trainkit.float32) is packed
    assert packed.cpu() is packed
    doubled = packed.double()
    assert doubled.data.dtype == trainkit.float64 and doubled.sorted_indices.dtype == trainkit.int64
    assert doubled.batch_sizes is packed.batch_sizes
    assert doubled.float().data.dtype == trainkit.float32
    assert packed.to(dtype=trainkit.float64).unsorted_indices.dtype == trainkit.int64
    assert packed.long().data.dtype == trainkit.int64 and packed.half().data.dtype == trainkit.float16
    assert packed.is_cuda is False and packed.is_pinned() is False


def test_packed_sequence_batch_sizes_must_be_on_the_cpu(torch):
    if not trainkit.cuda.is_available():
        pytest.skip("needs a GPU")
    with pytest.raises(ValueError, match="batch_sizes should always be on CPU"):
        tk_rnn.PackedSequence(trainkit.ones(3), trainkit.tensor([2, 1]).cuda())


def test_packed_sequence_moves_to_the_gpu():
    if not trainkit.cuda.is_available():
        pytest.skip("needs a GPU")
    packed = tk_rnn.pack_sequence([trainkit.ones(3, 2), trainkit.ones(1, 2)], enforce_sorted=False).cuda()
    assert packed.is_cuda and packed.sorted_indices.is_cuda and not packed.batch_sizes.is_cuda
    padded, lengths = tk_rnn.pad_packed_sequence(packed)
    assert padded.is_cuda and not lengths.is_cuda and lengths.tolist() == [3, 1]
    assert not packed.cpu().is_cuda


# --- pack_padded_sequence / pad_packed_sequence -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,steps", LENGTH_CASES)
def test_pack_pad_round_trip_against_torch(torch, rng, lengths, steps, batch_first, dtype):
    b = len(lengths)
    shape = (b, steps, 3) if batch_first else (steps, b, 3)
    x = rng.standard_normal(shape).astype(dtype)
    sorted_ok = all(lengths[i] >= lengths[i + 1] for i in range(b - 1))
    for enforce_sorted in [True, False] if sorted_ok else [False]:
        for as_tensor in (False, True):
            ours_x, ref_x = _pair(torch, x, requires_grad=True)
            ours_len = trainkit.tensor(lengths) if as_tensor else lengths
            ref_len = torch.tensor(lengths) if as_tensor else lengths
            ours = tk_rnn.pack_padded_sequence(ours_x, ours_len, batch_first, enforce_sorted)
            ref = torch.nn.utils.rnn.pack_padded_sequence(ref_x, ref_len, batch_first, enforce_sorted)
            _same_packed(ours, ref)
            total = steps + 2
            out, out_len = tk_rnn.pad_packed_sequence(ours, batch_first, padding_value=-7.5, total_length=total)
            ref_out, ref_out_len = torch.nn.utils.rnn.pad_packed_sequence(ref, batch_first, -7.5, total)
            _same(out, ref_out)
            _same(out_len, ref_out_len)
            assert out.dtype == ours_x.dtype
            weights = rng.standard_normal(tuple(ref_out.shape)).astype(dtype)
            (out * trainkit.tensor(weights)).sum().backward()
            (ref_out * torch.tensor(weights)).sum().backward()
            _same(ours_x.grad, ref_x.grad)


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_packed_sequence_defaults_and_data_gradient(torch, rng, batch_first):
    lengths = [2, 4, 1]
    x = rng.standard_normal((4, 3, 2))
    ours_x, ref_x = _pair(torch, x)
    ours = tk_rnn.pack_padded_sequence(ours_x, lengths, enforce_sorted=False)
    ref = torch.nn.utils.rnn.pack_padded_sequence(ref_x, lengths, enforce_sorted=False)
    data = trainkit.tensor(to_numpy(ours.data), requires_grad=True)
    ref_data = torch.tensor(to_numpy(ref.data), requires_grad=True)
    out, _ = tk_rnn.pad_packed_sequence(ours._replace(data=data), batch_first=batch_first)
    ref_out, _ = torch.nn.utils.rnn.pad_packed_sequence(ref._replace(data=ref_data), batch_first=batch_first)
    _same(out, ref_out)
    weights = rng.standard_normal(tuple(ref_out.shape))
    (out * trainkit.tensor(weights)).sum().backward()
    (ref_out * torch.tensor(weights)).sum().backward()
    _same(data.grad, ref_data.grad)


def test_unsorted_ties_keep_the_callers_order(torch):
    # ties within 16 sequences: torch's sort keeps them in order, as ours does
    lengths = [2, 3, 3, 1, 1, 1, 3, 3, 3, 2, 2, 2]
    ours = tk_rnn.pack_padded_sequence(trainkit.zeros(3, 12), lengths, enforce_sorted=False)
    ref = torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(3, 12), lengths, enforce_sorted=False)
    _same_packed(ours, ref)


@pytest.mark.parametrize("size", [17, 40, 100, 333])
def test_unsorted_ties_in_large_batches_come_out_in_torchs_order(torch, rng, size):
    # past 16 sequences torch's unstable sort reorders equal lengths; sorted_indices and data follow it
    patterns = [
        rng.integers(1, 4, size),
        np.sort(rng.integers(1, 6, size)),
        np.arange(size) % 5 + 1,
        np.ones(size, dtype=np.int64),
        np.arange(size) + 1,
    ]
    for lengths in patterns:
        x = rng.standard_normal((int(lengths.max()), size))
        ours = tk_rnn.pack_padded_sequence(trainkit.tensor(x), lengths.tolist(), enforce_sorted=False)
        ref = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lengths.tolist(), enforce_sorted=False)
        _same_packed(ours, ref)


def test_pack_padded_sequence_multi_dim_features_and_int_data(torch, rng):
    x = rng.integers(0, 9, size=(4, 2, 2, 3))
    ours = tk_rnn.pack_padded_sequence(trainkit.tensor(x), [4, 2])
    ref = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), [4, 2])
    _same_packed(ours, ref)
    _same(tk_rnn.pad_packed_sequence(ours)[0], torch.nn.utils.rnn.pad_packed_sequence(ref)[0])


def test_packing_gradcheck_and_gradgradcheck(rng):
    x = trainkit.tensor(rng.standard_normal((4, 3, 2)), requires_grad=True)

    def round_trip(t):
        packed = tk_rnn.pack_padded_sequence(t, [2, 4, 3], enforce_sorted=False)
        return tk_rnn.pad_packed_sequence(packed, batch_first=True, padding_value=1.5, total_length=5)[0] ** 2

    assert gradcheck(round_trip, (x,))
    assert gradgradcheck(round_trip, (x,))

    def packed_data(t):
        return tk_rnn.pack_padded_sequence(t, [4, 3, 1]).data.sin()

    assert gradcheck(packed_data, (x,))
    assert gradgradcheck(packed_data, (x,))


def test_double_backward_against_torch(torch, rng):
    x = rng.standard_normal((3, 2, 2))
    ours_x, ref_x = _pair(torch, x, requires_grad=True)
    grads = []
    for lib, t in ((trainkit, ours_x), (torch, ref_x)):
        rnn = _lib_rnn(lib)
        padded, _ = rnn.pad_packed_sequence(rnn.pack_padded_sequence(t, [3, 1]), batch_first=True)
        (g,) = lib.autograd.grad((padded**3).sum(), t, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), t)
        grads.append((g, gg))
    _same(grads[0][0], grads[1][0])
    _same(grads[0][1], grads[1][1])


# --- pad_sequence / pack_sequence / unpad_sequence / unpack_sequence ----------------------------------------------

SEQUENCE_CASES = [[3, 1, 2], [1], [4, 4], [2, 5, 3, 5, 1], [0, 2], [3, 0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths", SEQUENCE_CASES)
def test_pad_sequence_against_torch(torch, rng, lengths, batch_first, padding_side, dtype):
    arrays = [rng.standard_normal((n, 2, 3)).astype(dtype) for n in lengths]
    pairs = [_pair(torch, a, requires_grad=True) for a in arrays]
    out = tk_rnn.pad_sequence([p[0] for p in pairs], batch_first, 2.5, padding_side)
    ref = torch.nn.utils.rnn.pad_sequence([p[1] for p in pairs], batch_first, 2.5, padding_side)
    _same(out, ref)
    weights = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    (out * trainkit.tensor(weights)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for ours, theirs in pairs:
        _same(ours.grad, theirs.grad, TOL[dtype])


def test_pad_sequence_defaults_dtypes_broadcasting_and_tensor_input(torch, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 1))
    for make in (
        lambda lib: [lib.tensor(a), lib.tensor(b)],
        lambda lib: [lib.tensor(a, dtype=lib.float64), lib.tensor(b, dtype=lib.float32)],
        lambda lib: [lib.tensor(a, dtype=lib.float32), lib.tensor(b, dtype=lib.float64)],
        lambda lib: lib.tensor(a),
        lambda lib: (lib.tensor([1, 2]), lib.tensor([3])),
    ):
        _same(tk_rnn.pad_sequence(make(trainkit)), torch.nn.utils.rnn.pad_sequence(make(torch)))
    a = trainkit.tensor(rng.standard_normal((2, 4)), requires_grad=True)
    c = trainkit.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    ta = torch.tensor(to_numpy(a), requires_grad=True)
    tc = torch.tensor(to_numpy(c), requires_grad=True)
    out = tk_rnn.pad_sequence(iter([a, c]), batch_first=True)
    ref = torch.nn.utils.rnn.pad_sequence(iter([ta, tc]), batch_first=True)
    _same(out, ref)
    (out**2).sum().backward()
    (ref**2).sum().backward()
    _same(a.grad, ta.grad)
    _same(c.grad, tc.grad)


def test_pad_sequence_gradcheck(rng):
    a = trainkit.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    b = trainkit.tensor(rng.standard_normal((1, 2)), requires_grad=True)

    def fn(x, y):
        return tk_rnn.pad_sequence([x, y], batch_first=True, padding_value=0.5, padding_side="left") ** 2

    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("lengths", [[4, 2, 1], [3], [2, 2], [1, 4, 2, 4]])
def test_pack_and_unpack_sequence_against_torch(torch, rng, lengths, enforce_sorted):
    if enforce_sorted and sorted(lengths, reverse=True) != lengths:
        pytest.skip("unsorted lengths are refused, tested below")
    arrays = [rng.standard_normal((n, 3)).astype("float32") for n in lengths]
    pairs = [_pair(torch, a, requires_grad=True) for a in arrays]
    ours = tk_rnn.pack_sequence([p[0] for p in pairs], enforce_sorted)
    ref = torch.nn.utils.rnn.pack_sequence([p[1] for p in pairs], enforce_sorted)
    _same_packed(ours, ref)
    unpacked = tk_rnn.unpack_sequence(ours)
    ref_unpacked = torch.nn.utils.rnn.unpack_sequence(ref)
    assert len(unpacked) == len(ref_unpacked)
    total, ref_total = 0, 0
    for i, (u, r) in enumerate(zip(unpacked, ref_unpacked)):
        _same(u, r)
        total = total + (u * (i + 1)).tanh().sum()
        ref_total = ref_total + (r * (i + 1)).tanh().sum()
    total.backward()
    ref_total.backward()
    for ours_seq, ref_seq in pairs:
        _same(ours_seq.grad, ref_seq.grad, 1e-6)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence_against_torch(torch, rng, batch_first):
    lengths = [3, 1, 4]
    arrays = [rng.standard_normal((n, 2)) for n in lengths]
    ours_padded = tk_rnn.pad_sequence([trainkit.tensor(a) for a in arrays], batch_first)
    ref_padded = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays], batch_first)
    ours_padded.requires_grad_()
    ref_padded.requires_grad_()
    src, ref_src = ours_padded * 1, ref_padded * 1  # torch transposes a leaf in place: give it a non-leaf
    ours = tk_rnn.unpad_sequence(src, trainkit.tensor(lengths), batch_first)
    ref = torch.nn.utils.rnn.unpad_sequence(ref_src, torch.tensor(lengths), batch_first)
    for u, r, a in zip(ours, ref, arrays):
        _same(u, r)
        np.testing.assert_array_equal(to_numpy(u), a)
    sum(((u * u).sum() for u in ours), trainkit.tensor(0.0, dtype=trainkit.float64)).backward()
    sum(((r * r).sum() for r in ref), torch.tensor(0.0, dtype=torch.float64)).backward()
    _same(ours_padded.grad, ref_padded.grad)


# --- errors ---------------------------------------------------------------------------------------------------


def _packs(lengths, shape=(5, 3, 2), **kwargs):
    def fn(lib, dev):
        return _lib_rnn(lib).pack_padded_sequence(lib.zeros(*shape), lengths, **kwargs)

    return fn


@pytest.mark.parametrize(
    "lengths,kwargs,words",
    [
        ([3, 4, 2], {}, ["must be sorted in decreasing order", "enforce_sorted=False"]),
        ([4, 3, 0], {}, ["greater than 0"]),
        ([5, 3, -1], {}, ["greater than 0"]),
        ([0, 3, 2], {"enforce_sorted": False}, ["greater than 0"]),
        ([5, 3, 2, 1], {}, ["equal to batch_size", "4", "batch_size=3"]),
        ([5, 3], {}, ["equal to batch_size", "2", "batch_size=3"]),
        ([], {}, ["equal to batch_size"]),
        ([5, 3, 2], {"batch_first": True}, ["equal to batch_size", "batch_size=5"]),
    ],
)
def test_pack_padded_sequence_errors(torch, lengths, kwargs, words):
    assert_same_error(torch, _packs(lengths, **kwargs), *words)


def test_pack_padded_sequence_more_errors(torch):
    assert_same_error(torch, _packs([1, 1, 1], shape=(0, 3)), "Cannot pack empty tensors")
    assert_same_error(torch, _packs([5, 3, 2, 1], enforce_sorted=False))
    assert_same_error(torch, _packs([4], shape=(4,)), "Dimension out of range")
    assert_same_error(torch, _packs([4], shape=(4,), batch_first=True), "Dimension out of range")

    def two_d_lengths(lib, dev):
        return _lib_rnn(lib).pack_padded_sequence(lib.zeros(5, 3), lib.tensor([[5, 3, 2]]))

    assert_same_error(torch, two_d_lengths, "'lengths' argument should be a 1D CPU int64 tensor", "2D")

    def scalar_lengths(lib, dev):
        return _lib_rnn(lib).pack_padded_sequence(lib.zeros(5, 3), lib.tensor(5))

    assert_same_error(torch, scalar_lengths, "1D CPU int64 tensor", "0D")


def test_lengths_past_the_input_are_refused():
    # torch reads past the input here and returns a malformed PackedSequence; we refuse
    with pytest.raises(RuntimeError, match="at most the number of time steps"):
        tk_rnn.pack_padded_sequence(trainkit.zeros(5, 3, 2), [6, 3, 2])


def test_float_lengths_are_truncated_as_torch(torch):
    ours = tk_rnn.pack_padded_sequence(trainkit.ones(5, 3), trainkit.tensor([5.0, 3.7, 2.2]))
    ref = torch.nn.utils.rnn.pack_padded_sequence(torch.ones(5, 3), torch.tensor([5.0, 3.7, 2.2]))
    _same_packed(ours, ref)


def test_pad_packed_sequence_total_length_error(torch):
    def fn(lib, dev):
        rnn = _lib_rnn(lib)
        return rnn.pad_packed_sequence(rnn.pack_padded_sequence(lib.zeros(3, 2), [3, 1]), total_length=2)

    assert_same_error(torch, fn, "total_length=2", "max sequence length being 3")


@pytest.mark.parametrize(
    "make,words",
    [
        (lambda lib: [], ["received an empty list of sequences"]),
        (lambda lib: 5, ["Expected iterable for input sequences", "int"]),
        (
            lambda lib: [lib.ones(2, 3), lib.ones(3, 2)],
            ["The size of tensor a (3) must match the size of tensor b (2)"],
        ),
        (lambda lib: [lib.ones(2), lib.ones(3, 4)], ["The size of tensor a (3) must match the size of tensor b (4)"]),
        (lambda lib: [lib.ones(2, 1), lib.ones(3, 4)], ["output with shape [3, 1] doesn't match the broadcast shape"]),
        (lambda lib: [lib.ones(()), lib.ones(3)], []),
    ],
)
def test_pad_sequence_errors(torch, make, words):
    assert_same_error(torch, lambda lib, dev: _lib_rnn(lib).pad_sequence(make(lib)), *words)


def test_pad_sequence_padding_side_error(torch):
    def fn(lib, dev):
        return _lib_rnn(lib).pad_sequence([lib.ones(2)], padding_side="middle")

    assert_same_error(torch, fn, "Expected padding_side to be one of left or right, but got middle.")


def test_pack_sequence_errors(torch):
    assert_same_error(torch, lambda lib, dev: _lib_rnn(lib).pack_sequence([]), "received an empty list")
    assert_same_error(
        torch,
        lambda lib, dev: _lib_rnn(lib).pack_sequence([lib.ones(2), lib.ones(3)]),
        "must be sorted in decreasing order",
    )


def test_unpad_sequence_of_a_leaf_that_requires_grad(torch):
    def fn(lib, dev):
        return _lib_rnn(lib).unpad_sequence(lib.zeros(3, 2, requires_grad=True), lib.tensor([3, 1]))

    assert_same_error(torch, fn, "leaf Variable that requires grad is being used in an in-place operation")
    with trainkit.no_grad():
        out = tk_rnn.unpad_sequence(trainkit.zeros(3, 2, requires_grad=True), trainkit.tensor([3, 1]))
    assert [tuple(o.shape) for o in out] == [(3,), (1,)]
