"""Per-op overhead of small ops, forward and forward+backward: trainkit beside PyTorch (CPU) and plain NumPy.

The workload is a chain of element-wise ops on a small vector, where the time is almost all framework overhead:
``y = tanh(y * w) + x`` repeated, then a sum. The NumPy column is the same computation with the backward written
by hand: the floor that any framework on NumPy can approach. Figures are microseconds per op (median of repeats).

    python benchmarks/op_overhead.py [--size 16] [--steps 100] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

OPS_PER_STEP = 3  # mul, tanh, add


def numpy_forward(x, w, steps):
    y = x
    for _ in range(steps):
        y = np.tanh(y * w) + x
    return y.sum()


def numpy_forward_backward(x, w, steps):
    y = x
    saved = []
    for _ in range(steps):
        t = np.tanh(y * w)
        saved.append((y, t))
        y = t + x
    gy = np.ones_like(y)
    gx = np.zeros_like(x)
    gw = np.zeros_like(w)
    for y_in, t in reversed(saved):
        gx += gy
        gt = gy * (1 - t * t)
        gw += gt * y_in
        gy = gt * w
    gx += gy
    return gx, gw


def framework_forward(lib, x, w, steps):
    with lib.no_grad():
        y = x
        for _ in range(steps):
            y = (y * w).tanh() + x
        return y.sum()


def framework_forward_backward(lib, x, w, steps):
    x.grad = None
    w.grad = None
    y = x
    for _ in range(steps):
        y = (y * w).tanh() + x
    y.sum().backward()
    return x.grad, w.grad


def median_us(fn, repeats: int, ops: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / ops * 1e6


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    ops = args.steps * OPS_PER_STEP + 1

    import trainkit

    rng = np.random.default_rng(0)
    xa = rng.standard_normal(args.size).astype(np.float32)
    wa = rng.standard_normal(args.size).astype(np.float32) * 0.5
    results = {}
    results["numpy"] = (
        median_us(lambda: numpy_forward(xa, wa, args.steps), args.repeats, ops),
        median_us(lambda: numpy_forward_backward(xa, wa, args.steps), args.repeats, ops),
    )
    xt = trainkit.tensor(xa, requires_grad=True)
    wt = trainkit.tensor(wa, requires_grad=True)
    results["trainkit"] = (
        median_us(lambda: framework_forward(trainkit, xt, wt, args.steps), args.repeats, ops),
        median_us(lambda: framework_forward_backward(trainkit, xt, wt, args.steps), args.repeats, ops),
    )
    try:
        import torch

        torch.set_num_threads(1)
        xp = torch.tensor(xa, requires_grad=True)
        wp = torch.tensor(wa, requires_grad=True)
        results["torch"] = (
            median_us(lambda: framework_forward(torch, xp, wp, args.steps), args.repeats, ops),
            median_us(lambda: framework_forward_backward(torch, xp, wp, args.steps), args.repeats, ops),
        )
        gx, gw = framework_forward_backward(trainkit, xt, wt, args.steps)
        tx, tw = framework_forward_backward(torch, xp, wp, args.steps)
        assert np.allclose(gx.numpy(), tx.numpy(), rtol=1e-4, atol=1e-5), "trainkit and torch disagree"
    except ImportError:
        pass

    print(f"chain of {ops} small ops on float32[{args.size}]; microseconds per op (median of {args.repeats})")
    print(f"{'':10s}{'forward':>10s}{'fwd+bwd':>10s}{'fwd x torch':>13s}{'f+b x torch':>13s}{'f+b x numpy':>13s}")
    for name, (fwd, both) in results.items():
        vs_torch = results.get("torch")
        rt = f"{fwd / vs_torch[0]:13.2f}{both / vs_torch[1]:13.2f}" if vs_torch else f"{'-':>13s}{'-':>13s}"
        print(f"{name:10s}{fwd:10.2f}{both:10.2f}{rt}{both / results['numpy'][1]:13.2f}")
    return results


if __name__ == "__main__":
    main()
