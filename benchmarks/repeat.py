"""Run one workload of the suite a fixed number of times, for instruction counts and profiles.

Wall-clock timings on a shared machine are noisy; instruction counts are not. Run the workload ``N`` times and
``0`` times under callgrind and take the difference: what is left is the cost of ``N`` units of work, without the
imports and the build::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m benchmarks.repeat W3 10
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m benchmarks.repeat W3 0

``--per-op`` divides by the workload's unit (ops per call for tiny_ops), ``--callgrind`` runs both counts and prints
the difference, and ``--profile`` prints a cProfile table of the ``N`` runs instead.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from benchmarks import suite


def _workload(name: str) -> suite.Workload:
    for i, work in enumerate(suite.WORKLOADS, 1):
        if name in (work.name, f"W{i}"):
            return work
    raise SystemExit(f"unknown workload {name!r}: one of " + ", ".join(w.name for w in suite.WORKLOADS))


def _instructions(args, counts: tuple[int, ...]) -> list[int]:
    """Instructions callgrind counts for runs of each of ``counts`` units (imports, build and warm-up included);
    the runs go side by side."""
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    runs = [
        subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-m",
                "benchmarks.repeat",
                args.workload,
                str(times),
                "--impl",
                args.impl,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for times in counts
    ]
    totals = []
    for run in runs:
        err = run.communicate()[1]
        found = re.search(r"Collected : ([\d,]+)", err)
        if run.returncode or found is None:
            raise SystemExit(f"callgrind run failed:\n{err[-2000:]}")
        totals.append(int(found.group(1).replace(",", "")))
    return totals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.repeat", description=__doc__.splitlines()[0])
    parser.add_argument("workload", help="a workload name or W number (tiny_ops, W3)")
    parser.add_argument("times", type=int, help="how many units of work to run after the warm-up")
    parser.add_argument("--impl", default="trainkit", choices=suite.IMPLS)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--profile", action="store_true", help="print a cProfile table of the timed runs")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions of TIMES runs and of none under callgrind; print the difference",
    )
    args = parser.parse_args(argv)
    work = _workload(args.workload)
    if args.callgrind:
        base, full = _instructions(args, (0, args.times))
        per_unit = (full - base) / args.times
        line = f"{work.name} {args.impl}: {per_unit:,.0f} instructions per call"
        if work.per != 1:
            line += f", {per_unit / work.per:,.0f} per {work.unit.split('/')[-1]}"
        print(line)
        return 0
    run = work.build(args.impl, args.device)
    run()  # warm up as the suite does: the first calls fill caches
    run()
    if args.impl == "compiled":
        run()  # captured, replayed once, then written out as code: what is counted is the replay of that code
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    for _ in range(args.times):
        run()
    if args.profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
