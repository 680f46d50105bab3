"""The differential harness itself: it finds each kind of disagreement, and agrees where it should."""

from __future__ import annotations

import numpy as np
import pytest

from . import run
from .cases import configs
from .harness import Case, Record, T, compare, draw_case, same_values

torch = pytest.importorskip("torch")
import trainkit  # noqa: E402


def lib_or_ref(lib_fn, ref_fn):
    """A fake op that is ``lib_fn`` on trainkit and ``ref_fn`` on torch."""
    return lambda L, *args: (lib_fn if L is trainkit else ref_fn)(L, *args)


def check(lib_fn, ref_fn, *args) -> Record:
    return compare(Case("fake", "fake|" + repr(args), lib_or_ref(lib_fn, ref_fn), args), trainkit, torch)


def raise_(cls):
    def fn(L, *args):
        raise cls("made to fail")

    return fn


@pytest.mark.parametrize(
    "kind, lib_fn, ref_fn",
    [
        ("value", lambda L, x: x.sin(), lambda L, x: x.cos()),
        ("dtype", lambda L, x: (x * 1).double(), lambda L, x: (x * 1).float()),
        ("shape", lambda L, x: x.reshape(-1), lambda L, x: x),
        ("raises", raise_(ValueError), lambda L, x: x),
        ("raises", lambda L, x: x, raise_(RuntimeError)),
        ("exception class", raise_(ValueError), raise_(RuntimeError)),
        ("exception class", raise_(RuntimeError), raise_(NotImplementedError)),
        ("requires_grad", lambda L, x: x.detach(), lambda L, x: x * 1),
        ("grad_fn", lambda L, x: x * 2, lambda L, x: x + x),
        ("grad", lambda L, x: x * 3 - x.detach(), lambda L, x: x * 2),
        ("value", lambda L, x: (x.sum().item(), 1), lambda L, x: (x.sum().item() + 1, 1)),
        ("shape", lambda L, x: (x, x), lambda L, x: (x,)),
    ],
)
def test_a_wrong_fake_op_is_reported(kind, lib_fn, ref_fn):
    record = check(lib_fn, ref_fn, T((2, 3)))
    assert not record.agrees
    assert kind in record.kinds, record


def test_the_same_op_agrees_on_every_kind_of_input():
    for x in (T((2, 3)), T((), "f64"), T((4, 5), domain="edge"), T((3, 4), layout="T"), T((2, 0, 3)), T((3,), "i64")):
        record = check(lambda L, x: x.abs() * 2, lambda L, x: x.abs() * 2, x)
        assert record.agrees, record


def test_nan_equals_nan_and_inf_must_match():
    nan = T((3,), value=[float("nan"), -1.0, float("inf")])
    assert check(lambda L, x: x.sqrt(), lambda L, x: x.sqrt(), nan).agrees
    assert not check(lambda L, x: x.sqrt().nan_to_num(), lambda L, x: x.sqrt(), nan).agrees
    assert same_values(np.array([np.nan, np.inf]), np.array([np.nan, np.inf]), "float32")
    assert not same_values(np.array([np.inf]), np.array([-np.inf]), "float32")
    assert not same_values(np.array([np.nan]), np.array([0.0]), "float64")
    assert check(lambda L, x: float(x[0]), lambda L, x: float(x[0]), nan).agrees


def test_both_raising_agrees_whatever_the_messages():
    def one(L, x):
        raise RuntimeError("one message")

    def other(L, x):
        raise RuntimeError("another message entirely")

    assert check(one, other, T((2,))).agrees
    assert check(lambda L, x: x[5], lambda L, x: x[7], T((2,))).agrees  # IndexError on both


def test_the_known_list_must_stay_true():
    agree = Record("op", "op|a", [])
    differ = Record("op", "op|b", ["value"], "1 vs 2")
    assert run.check_against_known([agree, differ], {"op|b": "value"}) == []
    stale = run.check_against_known([agree], {"op|a": "value: fixed since"})
    assert stale and "now agrees" in stale[0]
    new = run.check_against_known([differ], {})
    assert new and "new disagreement" in new[0]


def test_known_list_round_trip(tmp_path):
    records = [Record("op", "op|x,1;dim=0", ["dtype"], "float64 vs torch float32"), Record("op", "op|y", [])]
    run.write_known(records, tmp_path / "known.txt")
    assert run.read_known(tmp_path / "known.txt") == {"op|x,1;dim=0": "dtype: float64 vs torch float32"}


def test_case_ids_are_unique_and_inputs_reproducible():
    cases = configs()
    assert len({c.cid for c in cases}) == len(cases)
    case = next(c for c in cases if c.op == "torch.add")
    first, again = draw_case(case), draw_case(case)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first.arrays, again.arrays))
    assert [c.cid for c in run.sample(500, 3)] == [c.cid for c in run.sample(500, 3)]
    assert [c.cid for c in run.sample(500, 3)] != [c.cid for c in run.sample(500, 4)]
    redrawn = run.sample(3 * len(cases), 0, op="torch.add")
    assert any(c.cid.endswith("|d2") for c in redrawn)
