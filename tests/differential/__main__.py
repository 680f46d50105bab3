"""``python -m tests.differential [--calls N] [--seed S] [--report docs/differential.md] [--update-known]``

Runs a seeded sample of calls on trainkit and torch, prints the agreement overall, by kind and by op, and
optionally writes the report page and the known-disagreement list of the test's sample.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__.splitlines()[2])
    parser.add_argument("--calls", type=int, default=run.CI_CALLS, help=f"calls to sample (default {run.CI_CALLS})")
    parser.add_argument("--seed", type=int, default=run.CI_SEED, help=f"sampling seed (default {run.CI_SEED})")
    parser.add_argument("--report", type=Path, help="write the Markdown report here (docs/differential.md)")
    parser.add_argument("--baseline", help="a line to put under the figure in the report (an earlier figure)")
    parser.add_argument(
        "--update-known",
        action="store_true",
        help="write tests/differential/known.txt from the test's sample (default calls and seed)",
    )
    parser.add_argument("--top", type=int, default=25, help="ops listed in the printed summary")
    args = parser.parse_args(argv)
    if args.update_known and (args.calls, args.seed) != (run.CI_CALLS, run.CI_SEED):
        parser.error("--update-known lists the disagreements of the test's sample: leave --calls and --seed out")

    import torch

    import trainkit

    print(f"trainkit from {Path(trainkit.__file__).parent}; torch {torch.__version__}", file=sys.stderr)
    cases = run.sample(args.calls, args.seed)
    start = time.perf_counter()
    records = run.run(cases, trainkit, torch)
    print(f"{len(records)} calls in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(run.text_summary(records, args.top))
    if args.report:
        args.report.write_text(run.markdown(records, args.calls, args.seed, args.baseline))
        print(f"wrote {args.report}", file=sys.stderr)
    if args.update_known:
        run.write_known(records)
        print(f"wrote {run.KNOWN} ({sum(not r.agrees for r in records)} entries)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
