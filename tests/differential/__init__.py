"""The differential test: trainkit against torch 2.13 on the same seeded calls.

- ``cases.py``: the argument templates by op family; ``surface.py``: the names covered and those skipped.
- ``harness.py``: building the inputs, calling both libraries, comparing; ``run.py``: sampling, known.txt, report.
- ``test_differential.py``: the fixed-seed sample, failing on any disagreement not in ``known.txt`` and on any
  entry of ``known.txt`` that now agrees; ``test_harness.py``: the harness finds what it should.

From the repository root: ``python -m tests.differential [--calls N] [--seed S] [--report docs/differential.md]
[--update-known]``.
"""
