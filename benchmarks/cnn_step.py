"""One training step of a small CNN: trainkit beside PyTorch (CPU), with the same weights and data.

Model: Conv2d 1->16 3x3 pad 1, ReLU, MaxPool 2, Conv2d 16->32 3x3 pad 1, ReLU, MaxPool 2, Flatten,
Linear 1568->10; batch 64 of 1x28x28; cross-entropy; SGD with momentum 0.9. A step is zero_grad, forward, loss,
backward and the optimizer update. Reports the median step time of each and their ratio.

    python benchmarks/cnn_step.py [--steps 20] [--batch 64] [--keep-freed-memory]

``--keep-freed-memory`` applies ``trainkit.cli.process.keep_freed_memory()`` first (glibc keeps freed blocks for
reuse; it applies to PyTorch's allocations too), as the ``trainkit`` command does for its own process.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def build(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


def copy_weights(src, dst) -> None:
    """Give the PyTorch model the trainkit model's weights, so both compute the same numbers."""
    import torch

    with torch.no_grad():
        for (_, p), (_, q) in zip(src.named_parameters(), dst.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))


def time_steps(lib, model, x, y, steps: int) -> tuple[float, float]:
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()
    times, loss = [], None
    for _ in range(steps + 2):  # two warm-up steps
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:]), float(loss.item())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--keep-freed-memory", action="store_true")
    args = parser.parse_args(argv)

    import trainkit
    from trainkit.cli.process import keep_freed_memory

    if args.keep_freed_memory and not keep_freed_memory():
        print("note: no glibc here; --keep-freed-memory changed nothing")

    rng = np.random.default_rng(0)
    xa = rng.standard_normal((args.batch, 1, 28, 28)).astype(np.float32)
    ya = rng.integers(0, 10, args.batch)
    trainkit.manual_seed(0)
    tk_model = build(trainkit)
    results = {"trainkit": time_steps(trainkit, tk_model, trainkit.tensor(xa), trainkit.tensor(ya), args.steps)}
    try:
        import torch

        th_model = build(torch)
        copy_weights(build_same(trainkit), th_model)
        results["torch"] = time_steps(torch, th_model, torch.tensor(xa), torch.tensor(ya), args.steps)
    except ImportError:
        pass
    tuned = ", freed memory kept" if args.keep_freed_memory else ""
    print(f"one SGD step of the small CNN, batch {args.batch} (median of {args.steps}{tuned})")
    for name, (seconds, loss) in results.items():
        ratio = f"  {seconds / results['torch'][0]:.2f}x torch" if "torch" in results else ""
        print(f"{name:9s} {seconds * 1e3:8.1f} ms  final loss {loss:.4f}{ratio}")
    return results


def build_same(lib):
    """A fresh trainkit model with the initial weights the timed one started from (same seed)."""
    lib.manual_seed(0)
    return build(lib)


if __name__ == "__main__":
    main()
