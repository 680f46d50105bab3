"""The benchmark suite: seven workloads, each in trainkit, PyTorch, hand-written NumPy and trainkit compiled
(``trainkit.compile`` of the same step), timed in one process.

Rounds interleave the implementations (trainkit, torch, numpy, trainkit, ...) so that drift of the machine hits
them alike; each reports the median and the min/max of its rounds, and ratios to PyTorch and to the NumPy limit.
All implementations start from the same weights, and ``check`` runs a few steps of each and compares them.
"""

from __future__ import annotations

import math
import platform
import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field

import numpy as np

import trainkit
from benchmarks import numpy_limit, sequence_steps
from trainkit.autograd import workspace
from trainkit.functional import winograd

IMPLS = ("trainkit", "torch", "numpy", "compiled")
COMPILED_TARGETS = {  # compiled trainkit / torch
    "mlp_step": 0.6,
    "tiny_ops": 0.5,
    "regression_fit": 0.35,
    "gpt_step": 0.8,
    "lstm_step": 1.0,
}
SETTLE_SECONDS = 0.2
MIN_SAMPLE_SECONDS = 0.05


def _torch():
    import torch

    return torch


def _sync(impl: str, device: str) -> None:
    if device == "cuda":
        if impl == "torch":
            _torch().cuda.synchronize()
        else:
            trainkit.cuda.synchronize()


@dataclass
class Workload:
    """One benchmark: ``build(impl, device)`` returns a zero-argument callable doing one unit of work."""

    name: str
    title: str
    target: float | None
    build: object
    check: object
    unit: str = "ms"
    per: int = 1  # divide the time by this (ops per call for tiny_ops)
    results: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------- model helpers
def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def _cnn(lib):
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


def _regression(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1))


def _weights(make) -> dict:
    """Initial weights from PyTorch's default initialisation, seeded: every implementation starts from them."""
    torch = _torch()
    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in make(torch).state_dict().items()}


def _load(model, weights: dict, lib, device: str):
    state = {k: lib.tensor(v) for k, v in weights.items()}
    model.load_state_dict(state)
    return model.to(device)


def _training_step(make, loss_name: str, lr: float, momentum: float, data, device: str, impl: str):
    """A callable doing one SGD step of ``make``'s model on ``data`` = (x, y) with ``impl``."""
    weights = _weights(make)
    x, y = data
    if impl == "numpy":
        xp = np
        if device == "cuda":
            import cupy as xp
        cls = {"mlp": numpy_limit.MLPStep, "cnn": numpy_limit.CNNStep, "regression": numpy_limit.RegressionFit}
        model = cls[loss_name[0]]({k: xp.asarray(v) for k, v in weights.items()}, xp=xp)
        xa, ya = xp.asarray(x), xp.asarray(y)
        return (lambda: model.step(xa, ya)), model
    lib = _torch() if impl == "torch" else trainkit
    model = _load(make(lib), weights, lib, device)
    opt = lib.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    loss_fn = lib.nn.CrossEntropyLoss() if loss_name[1] == "ce" else lib.nn.MSELoss()
    xt, yt = lib.tensor(x).to(device), lib.tensor(y).to(device)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(xt), yt)
        loss.backward()
        opt.step()
        return loss

    return (trainkit.compile(step) if impl == "compiled" else step), model


def _params(model) -> dict:
    if hasattr(model, "state_dict"):
        return {k: np.asarray(v.detach().cpu().numpy()) for k, v in model.state_dict().items()}
    return {k: np.asarray(v.get() if hasattr(v, "get") else v) for k, v in model.params.items()}


def _check_steps(make, loss_name, lr, momentum, data, device, steps=3, rtol=2e-3, atol=2e-5):
    """Run ``steps`` steps in each implementation from the same weights; return the largest disagreement."""
    finals = {}
    for impl in IMPLS:
        step, model = _training_step(make, loss_name, lr, momentum, data, device, impl)
        for _ in range(steps):
            step()
        finals[impl] = _params(model)
    worst = 0.0
    for impl in ("trainkit", "numpy", "compiled"):
        for k, ref in finals["torch"].items():
            got = finals[impl][k]
            np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{impl} {k}")
            worst = max(worst, float(np.max(np.abs(got - ref))))
    return worst


# ------------------------------------------------------------------------------------------------- workloads
def _mlp_data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256)


def _cnn_data(batch: int = 64):
    rng = np.random.default_rng(0)
    return rng.standard_normal((batch, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, batch)


def _regression_data():
    x = np.linspace(-1, 1, 100, dtype=np.float32).reshape(-1, 1)
    y = (x**2 + 0.1 * np.random.default_rng(0).standard_normal(x.shape)).astype(np.float32)
    return x, y


def mlp_step(impl, device):
    return _training_step(_mlp, ("mlp", "ce"), 0.01, 0.9, _mlp_data(), device, impl)[0]


def cnn_step(impl, device):
    return _training_step(_cnn, ("cnn", "ce"), 0.01, 0.9, _cnn_data(), device, impl)[0]


def regression_fit(impl, device):
    """Build the model and train 200 full-batch steps: the whole tutorial run."""
    data = _regression_data()

    def run():
        step, _ = _training_step(_regression, ("regression", "mse"), 0.2, 0.0, data, device, impl)
        for _ in range(200):
            step()

    return run


TINY_ITERATIONS = 500
TINY_OPS = TINY_ITERATIONS * 4


def tiny_ops(impl, device, backward: bool = True):
    """500 iterations of h = x*w; h = h + b; t = tanh(h); x = x + t on 1-element tensors (then backward)."""
    if impl == "numpy":
        x0, w, b = (np.array([v], dtype=np.float32) for v in (0.1, 0.5, 0.2))
        if backward:
            return lambda: numpy_limit.tiny_ops(x0, w, b, TINY_ITERATIONS)

        def forward():
            x = x0
            for _ in range(TINY_ITERATIONS):
                x = x + np.tanh(x * w + b)
            return x

        return forward
    lib = _torch() if impl == "torch" else trainkit
    x0, w, b = (lib.tensor([v], requires_grad=True, device=device) for v in (0.1, 0.5, 0.2))

    def run():
        x = x0
        for _ in range(TINY_ITERATIONS):
            h = x * w
            h = h + b
            t = h.tanh()
            x = x + t
        if backward:
            x.sum().backward()
        return x

    def forward():
        with lib.no_grad():
            return run()

    if impl == "compiled":
        return trainkit.compile(run if backward else forward)
    return run if backward else forward


def conv_big(impl, device):
    """One Conv2d(64, 128, 3, padding=1) forward and backward on 32x64x32x32, the input's grad included."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64, 32, 32)).astype(np.float32)
    g = rng.standard_normal((32, 128, 32, 32)).astype(np.float32)
    weights = _weights(lambda lib: lib.nn.Conv2d(64, 128, 3, padding=1))
    if impl == "numpy":
        xp = np
        if device == "cuda":
            import cupy as xp
        conv = numpy_limit.ConvBig({k: xp.asarray(v) for k, v in weights.items()}, xp=xp)
        xa, ga = xp.asarray(x), xp.asarray(g)
        return lambda: conv.step(xa, ga)
    lib = _torch() if impl == "torch" else trainkit
    conv = _load(lib.nn.Conv2d(64, 128, 3, padding=1), weights, lib, device)
    xt = lib.tensor(x).to(device).requires_grad_()
    gt = lib.tensor(g).to(device)

    def run():
        xt.grad = None
        conv.zero_grad()
        conv(xt).backward(gt)

    return trainkit.compile(run) if impl == "compiled" else run


def _check_mlp(device):
    return _check_steps(_mlp, ("mlp", "ce"), 0.01, 0.9, _mlp_data(), device)


def _check_cnn(device):
    return _check_steps(_cnn, ("cnn", "ce"), 0.01, 0.9, _cnn_data(16), device)


def _check_regression(device):
    return _check_steps(_regression, ("regression", "mse"), 0.2, 0.0, _regression_data(), device, steps=20)


def _check_tiny(device):
    outs = {}
    for impl in ("trainkit", "torch", "compiled"):
        lib = _torch() if impl == "torch" else trainkit
        x0, w, b = (lib.tensor([v], requires_grad=True) for v in (0.1, 0.5, 0.2))

        def run(x0=x0, w=w, b=b):
            x = x0
            for _ in range(TINY_ITERATIONS):
                x = x + (x * w + b).tanh()
            x.sum().backward()

        # compiled: captured, then replayed twice, the gradients accumulating over the three calls
        calls = 3 if impl == "compiled" else 1
        step = trainkit.compile(run) if impl == "compiled" else run
        for _ in range(calls):
            step()
        outs[impl] = [float(t.grad.item()) / calls for t in (x0, w, b)]
    x0, w, b = (np.array([v], dtype=np.float32) for v in (0.1, 0.5, 0.2))
    outs["numpy"] = [float(np.asarray(g).item()) for g in numpy_limit.tiny_ops(x0, w, b, TINY_ITERATIONS)]
    for impl in ("trainkit", "numpy", "compiled"):
        np.testing.assert_allclose(outs[impl], outs["torch"], rtol=1e-4, err_msg=impl)
    return max(abs(a - b) for a, b in zip(outs["trainkit"], outs["torch"]))


def _check_conv(device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 64, 8, 8)).astype(np.float32)
    g = rng.standard_normal((2, 128, 8, 8)).astype(np.float32)
    weights = _weights(lambda lib: lib.nn.Conv2d(64, 128, 3, padding=1))
    grads = {}
    for impl in ("trainkit", "torch"):
        lib = trainkit if impl == "trainkit" else _torch()
        conv = _load(lib.nn.Conv2d(64, 128, 3, padding=1), weights, lib, "cpu")
        xt = lib.tensor(x).requires_grad_()
        conv(xt).backward(lib.tensor(g))
        grads[impl] = [t.grad.detach().numpy() for t in (xt, conv.weight, conv.bias)]
    conv = numpy_limit.ConvBig(dict(weights))
    conv.step(x, g)
    grads["numpy"] = [conv.grad_input, conv.grad_weight, conv.grad_bias]
    for impl in ("trainkit", "numpy"):
        for a, b in zip(grads[impl], grads["torch"]):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3, err_msg=impl)
    return 0.0


WORKLOADS = [
    Workload("mlp_step", "W1 mlp_step: MLP 784-512-256-10, batch 256, one SGD step", 0.9, mlp_step, _check_mlp),
    Workload("cnn_step", "W2 cnn_step: small CNN, batch 64, one SGD step", 1.0, cnn_step, _check_cnn),
    Workload(
        "tiny_ops",
        "W3 tiny_ops: 1-element ops, forward+backward",
        1.0,
        tiny_ops,
        _check_tiny,
        unit="us/op",
        per=TINY_OPS,
    ),
    Workload(
        "regression_fit", "W4 regression_fit: build + 200 full-batch SGD steps", 0.35, regression_fit, _check_regression
    ),
    Workload("conv_big", "W5 conv_big: Conv2d(64,128,3) fwd+bwd on 32x64x32x32", 0.8, conv_big, _check_conv),
    Workload(
        "gpt_step",
        "W6 gpt_step: GPT of 4 blocks, width 128, 4 heads, 16 x 64 tokens, one AdamW step",
        1.0,
        sequence_steps.gpt_step,
        sequence_steps.check_gpt,
    ),
    Workload(
        "lstm_step",
        "W7 lstm_step: LSTM LM 2x256, vocabulary 2000, 35 steps x 20, one clipped SGD step",
        1.5,
        sequence_steps.lstm_step,
        sequence_steps.check_lstm,
    ),
]


# ----------------------------------------------------------------------------------------------------- timing
def time_workload(work: Workload, device: str, rounds: int, impls=IMPLS) -> dict:
    """Interleaved rounds; returns {impl: [seconds per unit, ...]}.

    A sample is the mean of as many back-to-back calls as fill ``MIN_SAMPLE_SECONDS``, so that a call of a few
    milliseconds is not timed alone against the scheduler's noise; and each round starts with the next
    implementation in turn, so that none always runs right after the same other one.
    """
    runs = {impl: work.build(impl, device) for impl in impls}
    calls = {}
    for impl, run in runs.items():  # warm up: first calls build caches, allocate, load kernels
        run()
        _sync(impl, device)
        start = time.perf_counter()
        run()
        _sync(impl, device)
        calls[impl] = max(1, math.ceil(MIN_SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-9)))
    times: dict = {impl: [] for impl in impls}
    order = list(runs)
    for r in range(rounds):
        for impl in order[r % len(order) :] + order[: r % len(order)]:
            run, n = runs[impl], calls[impl]
            _sync(impl, device)
            # BLAS worker threads spin for about 0.1 s after a product; let them settle so that the previous
            # implementation's threads do not compete with this one's
            time.sleep(SETTLE_SECONDS if device == "cpu" else 0.0)
            start = time.perf_counter()
            for _ in range(n):
                run()
            _sync(impl, device)
            times[impl].append((time.perf_counter() - start) / (n * work.per))
    return times


def conv_algorithms(work: Workload, device: str) -> str:
    """Which algorithm trainkit's conv2d took in one unit of ``work``, e.g. ``'im2col 1, winograd 1'``; empty when
    it ran no convolution."""
    run = work.build("trainkit", device)
    winograd.ALGORITHMS_RUN.clear()
    run()
    return ", ".join(f"{name} {count}" for name, count in sorted(winograd.ALGORITHMS_RUN.items()))


def fresh_pages(work: Workload, device: str, impls=IMPLS) -> dict:
    """Minor page faults of one unit of ``work`` after two warm-up units, per implementation: how many fresh pages
    (4 KiB, faulted in and zeroed by the kernel) a step costs. Deterministic where timings are not."""
    out = {}
    for impl in impls:
        run = work.build(impl, device)
        run()
        run()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        run()
        out[impl] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return out


def peak_memory_mlp() -> dict:
    """Peak traced (NumPy) memory of one W1 forward+backward+step, trainkit vs the NumPy limit, in MiB."""
    out = {}
    for impl in ("trainkit", "numpy"):
        step = mlp_step(impl, "cpu")
        step()
        workspace.clear()  # arrays the pool kept from the warm-up would not be traced as this step's
        tracemalloc.start()
        tracemalloc.reset_peak()
        step()
        out[impl] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out


def retained_memory() -> dict:
    """Memory still held after backward when watching the MLP's hidden activations' grads: retain_grad keeps a
    grad tensor per watched tensor; a hook that records the norm keeps nothing. In MiB, traced."""
    out = {}
    x, y = _mlp_data()
    for way in ("nothing", "retain_grad", "hook"):
        trainkit.manual_seed(0)
        model = _mlp(trainkit)
        xt, yt = trainkit.tensor(x), trainkit.tensor(y)
        norms = []
        workspace.clear()  # arrays pooled by an earlier measurement would be reused here untraced
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        h1 = model[1](model[0](xt))
        h2 = model[3](model[2](h1))
        for h in (h1, h2):
            if way == "retain_grad":
                h.retain_grad()
            elif way == "hook":
                h.register_hook(lambda g, norms=norms: norms.append(float((g * g).sum().item()) ** 0.5))
        loss = trainkit.nn.functional.cross_entropy(model[4](h2), yt)
        loss.backward()
        del loss
        workspace.clear()  # what the pool keeps for the next step is not held by watching
        out[way] = (tracemalloc.get_traced_memory()[0] - before) / 2**20
        tracemalloc.stop()
        del h1, h2
    return out


def environment(device: str = "cpu") -> str:
    import numpy

    lines = [
        f"- machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"{__import__('os').cpu_count()} CPUs; {platform.platform()}",
        f"- Python {platform.python_version()}, NumPy {numpy.__version__}, trainkit {trainkit.__version__}",
    ]
    try:
        lines.append(f"- PyTorch {_torch().__version__} ({_torch().get_num_threads()} threads)")
    except ImportError:
        pass
    if device == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        lines.append(f"- GPU: {name}, CuPy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}")
    return "\n".join(lines)


def summarize(times: dict, work: Workload) -> dict:
    scale = 1e6 if work.unit == "us/op" else 1e3
    stats = {impl: (statistics.median(t) * scale, min(t) * scale, max(t) * scale) for impl, t in times.items()}
    return stats
