"""How much of a workload is matrix products: the floor under any NumPy framework, beside PyTorch's step.

A framework on NumPy runs its matrix products on NumPy's BLAS; however little Python it spends around them, a step
takes at least as long as its products. This program records every product the hand-written NumPy step of a
workload makes (``@``, ``matmul``, ``dot``, ``einsum``, with the shapes, dtypes and memory layouts of their
operands), then times, in interleaved rounds of one process:

- PyTorch's whole step (eager, ``--threads`` threads), the column the suite's ratios divide by;
- the same products alone in NumPy: what no NumPy framework can go below;
- the same products alone in PyTorch, for comparison with its own step;
- the NumPy limit's whole step and trainkit's compiled step.

::

    python -m benchmarks.products W1 W6 W7 [--rounds 7] [--threads 2]

A compiled target t (compiled trainkit / torch) is out of reach of a NumPy framework when the products alone take
more than t times torch's step; the table prints that share.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks import sequence_steps, suite


class _Traced(np.ndarray):
    """An array that notes each matrix product it takes part in (see ``record``)."""

    log: list = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [_plain(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        if ufunc is np.matmul and method == "__call__":
            _Traced.log.append(("matmul", None, tuple(_layout(x) for x in plain[:2])))
        return _wrap(getattr(ufunc, method)(*plain, **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        args, kwargs = _plain(args), _plain(kwargs)
        if func is np.einsum:
            _Traced.log.append(("einsum", args[0], tuple(_layout(x) for x in args[1:])))
        elif func in (np.dot, np.matmul):
            _Traced.log.append(("matmul", None, tuple(_layout(x) for x in args[:2])))
        return _wrap(func(*args, **kwargs))

    def dot(self, other, out=None):
        _Traced.log.append(("matmul", None, (_layout(_plain(self)), _layout(_plain(other)))))
        return _wrap(np.asarray(self).dot(_plain(other), out=_plain(out)))


def _plain(x):
    if isinstance(x, _Traced):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _wrap(x):
    if type(x) is np.ndarray:
        return x.view(_Traced)
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    return x


def _layout(a) -> tuple:
    """(shape, dtype, order): the order of the axes in memory, fastest last (a transposed view reads as such)."""
    a = np.asarray(a)
    order = tuple(int(i) for i in np.argsort([-abs(s) for s in a.strides], kind="stable")) if a.ndim else ()
    return (a.shape, a.dtype.str, order)


def _make(layout, lib, gen):
    """An array (``lib`` numpy) or tensor (torch) of the layout's shape and dtype whose axes lie in memory in the
    layout's order."""
    shape, dtype, order = layout
    stored = gen.standard_normal(tuple(shape[i] for i in order)).astype(dtype)
    a = stored.transpose(np.argsort(order)) if order else stored
    if lib == "numpy":
        return a
    import torch

    return torch.from_numpy(stored).permute(*[int(i) for i in np.argsort(order)]) if order else torch.tensor(a)


def record(work: suite.Workload) -> list:
    """The products of one step of ``work``'s hand-written NumPy implementation (after one warm-up step)."""
    model, data = _numpy_model(work.name)
    model.params = {k: v.view(_Traced) for k, v in model.params.items()}
    x, y = data
    model.step(x.view(_Traced), y.view(_Traced))
    _Traced.log = []
    model.step(x.view(_Traced), y.view(_Traced))
    log, _Traced.log = _Traced.log, []
    return log


def _numpy_model(name: str):
    if name == "mlp_step":
        return suite._training_step(suite._mlp, ("mlp", "ce"), 0.01, 0.9, suite._mlp_data(), "cpu", "numpy")[1], (
            suite._mlp_data()
        )
    if name == "gpt_step":
        model = sequence_steps.gpt_training("numpy", "cpu")[1]
        return model, sequence_steps.gpt_data(sequence_steps.GPT_BATCH, sequence_steps.GPT_CONTEXT)
    if name == "lstm_step":
        model = sequence_steps.lstm_training("numpy", "cpu")[1]
        return model, sequence_steps.lstm_data(sequence_steps.LSTM_STEPS, sequence_steps.LSTM_BATCH)
    raise SystemExit(f"{name}: only mlp_step (W1), gpt_step (W6) and lstm_step (W7) have their products recorded")


def products(log: list, lib: str):
    """A callable running the logged products on operands of the same layouts in ``lib`` (numpy or torch)."""
    gen = np.random.default_rng(0)
    calls = [(kind, spec, [_make(lay, lib, gen) for lay in layouts]) for kind, spec, layouts in log]
    if lib == "numpy":
        ops = [(np.einsum, (spec, *ops)) if kind == "einsum" else (np.matmul, tuple(ops)) for kind, spec, ops in calls]
    else:
        import torch

        ops = [
            (torch.einsum, (spec, *ops)) if kind == "einsum" else (torch.matmul, tuple(ops))
            for kind, spec, ops in calls
        ]

    def run():
        for fn, args in ops:
            fn(*args)

    return run


def _time(fn, seconds: float = 0.05) -> float:
    """Seconds per call: enough calls to last ``seconds``, once."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        took = time.perf_counter() - start
        if took >= seconds:
            return took / n


def measure(work: suite.Workload, rounds: int) -> dict:
    """Median seconds of each column (see the module's docstring) over interleaved rounds."""
    log = record(work)
    runs = {
        "torch step": work.build("torch", "cpu"),
        "numpy products": products(log, "numpy"),
        "torch products": products(log, "torch"),
        "numpy step": work.build("numpy", "cpu"),
        "compiled step": work.build("compiled", "cpu"),
    }
    for run in runs.values():
        for _ in range(3):
            run()
    times: dict = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            time.sleep(suite.SETTLE_SECONDS)  # OpenBLAS's threads spin a while after a product: let them rest
            times[name].append(_time(run))
    out = {name: statistics.median(t) for name, t in times.items()}
    out["products"] = len(log)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.products", description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="+", help="W1, W6, W7 (or their names)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's thread count (OpenBLAS uses its own)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    print(
        "| workload | products | torch step | NumPy products alone | torch products alone | NumPy limit step | "
        "compiled step | NumPy products / torch step | compiled target |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.workloads:
        work = next(w for i, w in enumerate(suite.WORKLOADS, 1) if name in (w.name, f"W{i}"))
        t = measure(work, args.rounds)
        ms = {k: f"{v * 1e3:.2f} ms" for k, v in t.items() if k != "products"}
        target = suite.COMPILED_TARGETS.get(work.name)
        print(
            f"| {work.title.split(':')[0]} | {t['products']} | {ms['torch step']} | {ms['numpy products']} | "
            f"{ms['torch products']} | {ms['numpy step']} | {ms['compiled step']} | "
            f"{t['numpy products'] / t['torch step']:.2f} | {'-' if target is None else f'<= {target}'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
