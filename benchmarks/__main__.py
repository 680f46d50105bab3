"""Run the benchmark suite: ``python -m benchmarks [--rounds 15] [--only W1,W2] [--device cpu|cuda] [--write]``.

Prints a table of medians (min-max) per implementation (trainkit, torch, the NumPy limit and trainkit compiled),
the ratios trainkit/torch, trainkit/NumPy-limit and compiled/torch, and each target; ``--write`` also records the
run in docs/benchmarks.md (or docs/benchmarks-cuda.md for the GPU).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from benchmarks import suite

GPU_TARGETS = {"mlp_step": 1.5, "conv_big": 1.5}  # trainkit / PyTorch CUDA


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="comma-separated workload names or W numbers (W1,cnn_step)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's thread count (OpenBLAS uses its own)")
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="let glibc keep freed blocks (what the trainkit command does for its process)",
    )
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--write", action="store_true", help="record the run in docs/benchmarks.md")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    if args.keep_freed_memory:
        from trainkit.cli.process import keep_freed_memory

        keep_freed_memory()
    wanted = {w.strip() for w in args.only.split(",") if w.strip()}
    works = [w for i, w in enumerate(suite.WORKLOADS, 1) if not wanted or w.name in wanted or f"W{i}" in wanted]
    command = " ".join(["python -m benchmarks", *(sys.argv[1:] if argv is None else argv)])
    lines = [
        f"# Benchmarks ({args.device})",
        "",
        f"Run on {datetime.date.today()} with `{command}`:",
        "",
        suite.environment(args.device),
        "",
        "| workload | trainkit | torch | NumPy limit | compiled | trainkit / torch | target | trainkit / NumPy | "
        "compiled / torch | compiled target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    algorithms, pages = [], []
    for work in works:
        if not args.skip_check and args.device == "cpu":
            work.check(args.device)
        impls = suite.IMPLS
        stats = suite.summarize(suite.time_workload(work, args.device, args.rounds, impls), work)
        ran = suite.conv_algorithms(work, args.device)
        if ran:
            algorithms.append(f"- {work.title.split(':')[0]}: {ran}")
        if args.device == "cpu":
            faults = suite.fresh_pages(work, args.device, impls)
            pages.append(f"- {work.title.split(':')[0]}: " + ", ".join(f"{i} {faults[i]}" for i in impls))
        ours, theirs, limit, compiled = (stats[i][0] for i in impls)
        cells = [f"{stats[i][0]:.3g} {work.unit} ({stats[i][1]:.3g}-{stats[i][2]:.3g})" for i in impls]
        target = work.target if args.device == "cpu" else GPU_TARGETS.get(work.name)
        met = "(none here)" if target is None else f"<= {target} " + ("met" if ours / theirs <= target else "missed")
        goal = suite.COMPILED_TARGETS.get(work.name) if args.device == "cpu" else None
        compiled_met = "-" if goal is None else f"<= {goal} " + ("met" if compiled / theirs <= goal else "missed")
        row = (
            f"| {work.title} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {ours / theirs:.2f} | {met} | "
            f"{ours / limit:.2f} | {compiled / theirs:.2f} | {compiled_met} |"
        )
        lines.append(row)
        print(row, flush=True)
    if algorithms:
        lines += ["", "Convolution algorithms in trainkit's run (conv2d calls in one unit of work):", "", *algorithms]
        print("\n".join(lines[-len(algorithms) - 2 :]))
    if pages:
        lines += [
            "",
            "Fresh pages: minor page faults in one unit of work, after two warm-up units (4 KiB each, "
            "faulted in and zeroed by the kernel):",
            "",
            *pages,
        ]
        print("\n".join(lines[-len(pages) - 2 :]))
    if args.device == "cpu" and (not wanted or "mlp_step" in wanted or "W1" in wanted):
        peak = suite.peak_memory_mlp()
        kept = suite.retained_memory()
        ratio = peak["trainkit"] / peak["numpy"]
        lines += [
            "",
            "Memory (traced NumPy allocations, MiB):",
            "",
            f"- W1 peak of one step: trainkit {peak['trainkit']:.1f}, NumPy limit {peak['numpy']:.1f}: "
            f"{ratio:.2f}x (target <= 1.2x: {'met' if ratio <= 1.2 else 'missed'})",
            f"- held after backward while watching two hidden activations' grads: nothing watched "
            f"{kept['nothing']:.2f}, retain_grad {kept['retain_grad']:.2f}, a norm-recording hook "
            f"{kept['hook']:.2f}",
        ]
        print("\n".join(lines[-3:]))
    if args.write:
        name = "benchmarks.md" if args.device == "cpu" else f"benchmarks-{args.device}.md"
        path = Path(__file__).resolve().parents[1] / "docs" / name
        path.write_text(with_run("\n".join(lines) + "\n", path.read_text() if path.exists() else ""))
        print(f"written to {path}")
    return 0


def with_run(run: str, old: str) -> str:
    r"""The results page with ``run`` in place of the run in ``old``: the run is the part above the first ``## ``
    section, and the sections below it stay (other studies such as benchmarks/ddp_step.py write theirs there, and
    the notes on the targets are written by hand).

    >>> with_run("# new\n", "# old\n\n## Notes\nkept\n")
    '# new\n\n## Notes\nkept\n'
    """
    return run + (old[old.index("\n## ") :] if "\n## " in old else "")


if __name__ == "__main__":
    sys.exit(main())
