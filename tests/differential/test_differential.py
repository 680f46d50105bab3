"""trainkit against torch 2.13 on a fixed-seed sample of calls: every disagreement must be listed in known.txt,
and every listed one must still disagree (regenerate the list with ``python -m tests.differential --update-known``).
"""

from __future__ import annotations

import pytest

from . import run
from .cases import uncovered_names
from .surface import SKIPPED, surface_names

KNOWN = run.read_known()
HINT = "\n(after fixing or breaking an op on purpose: python -m tests.differential --update-known)"


@pytest.fixture(scope="module")
def libs():
    torch = pytest.importorskip("torch")
    import trainkit

    return trainkit, torch


@pytest.mark.parametrize("op", run.ops())
def test_op_agrees_with_torch_except_known(op, libs):
    records = run.run(run.sample(op=op), *libs)
    problems = run.check_against_known(records, KNOWN)
    assert not problems, "\n".join(problems) + HINT


def test_known_entries_are_cases_of_the_sample():
    ids = {case.cid for case in run.sample()}
    missing = [cid for cid in KNOWN if cid not in ids]
    assert not missing, "known.txt lists calls the test no longer makes:\n" + "\n".join(missing[:20]) + HINT


def test_every_surface_name_is_called_or_skipped_with_a_reason():
    assert not uncovered_names()
    names = set(surface_names())
    assert not [n for n in SKIPPED if n not in names], "skipped names that the surface page does not list"
