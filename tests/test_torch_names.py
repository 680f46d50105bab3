"""Names PyTorch programs reach for, with torch's behaviour: ``autograd.Variable``, the legacy tensor types, ``cdist``,
the process-wide settings (deterministic algorithms, threads, matmul precision), ``multiprocessing``,
``utils.checkpoint``, ``accelerator`` and the private base classes ``_BatchNorm`` / ``_DropoutNd``."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl
from conftest import assert_same_error, to_numpy

import trainkit
from trainkit import nn
from trainkit.autograd import gradcheck

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------- Variable
def test_variable_is_a_detached_tensor_as_in_torch(torch):
    for lib in (trainkit, torch):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        v = lib.autograd.Variable(y, requires_grad=True)
        assert type(v) is lib.Tensor and v is not y
        assert v.is_leaf and v.grad_fn is None and v.requires_grad
        assert not lib.autograd.Variable(y).requires_grad
        assert isinstance(y, lib.autograd.Variable) and not isinstance(3, lib.autograd.Variable)
        assert not issubclass(lib.Tensor, lib.autograd.Variable)
        assert lib.autograd.Variable().shape == (0,)
        (v * v).sum().backward()
        assert to_numpy(v.grad).tolist() == [4.0, 4.0] and x.grad is None
    assert_same_error(torch, lambda lib, dev: lib.autograd.Variable([1.0]), "Variable data has to be a tensor")
    with pytest.warns(UserWarning, match="volatile was removed"):
        trainkit.autograd.Variable(trainkit.ones(1), volatile=True)
    from trainkit.autograd.variable import Variable  # torch.autograd.variable.Variable's path

    assert Variable is trainkit.autograd.Variable


# ------------------------------------------------------------------------------------- legacy tensor types
TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor"]
TYPES += ["ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", TYPES)
def test_legacy_types_build_and_check_as_torch(torch, name):
    ours, theirs = getattr(trainkit, name), getattr(torch, name)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours(2, 3).shape == theirs(2, 3).shape == (2, 3)
    assert ours(trainkit.Size([4])).shape == (4,) and ours().shape == theirs().shape == (0,)
    for data in ([1, 0, 3], (2, 3), np.array([1.5, 0.0])):
        np.testing.assert_array_equal(to_numpy(ours(data)), to_numpy(theirs(data)))
        assert str(ours(data).dtype).split(".")[1] == str(theirs(data).dtype).split(".")[1]
    for lib, cls in ((trainkit, ours), (torch, theirs)):
        assert isinstance(lib.zeros(2, dtype=cls.dtype), cls)
        other = lib.float64 if cls.dtype != lib.float64 else lib.float32
        assert not isinstance(lib.zeros(2, dtype=other), cls) and not isinstance([1], cls)
        assert not issubclass(cls, lib.Tensor) and cls.is_cuda is False
        same = lib.zeros(2, dtype=cls.dtype)
        assert cls(same).dtype == cls.dtype
    assert trainkit.ones(2).type(ours).dtype == ours.dtype


def test_legacy_types_refuse_as_torch(torch):
    assert_same_error(torch, lambda lib, dev: lib.FloatTensor(2, 3.0), "type must be tuple of ints,but got float")
    assert_same_error(torch, lambda lib, dev: lib.FloatTensor(3.5), "data must be a sequence (got float)")
    assert_same_error(torch, lambda lib, dev: lib.FloatTensor(lib.ones(2, dtype=lib.float64)), "expected")


# ------------------------------------------------------------------------------------------------- cdist
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, math.inf, 3.0, 0.5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cdist_values_and_gradients_match_torch(torch, rng, p, dtype):
    a, b = rng.standard_normal((2, 5, 3)), rng.standard_normal((4, 3))
    a[0, 1] = b[2]  # a zero distance: its gradient is zero
    a[1, 0] = b[1] + np.array([1.0, -1.0, 0.5])  # a tie for the largest difference (p = inf)
    g = rng.standard_normal((2, 5, 4))
    results = []
    for lib in (trainkit, torch):
        x1 = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        x2 = lib.tensor(b, dtype=getattr(lib, dtype), requires_grad=True)
        out = lib.cdist(x1, x2, p=p)
        out.backward(lib.tensor(g, dtype=getattr(lib, dtype)))
        results.append((out, x1.grad, x2.grad))
    tol = 1e-5 if dtype == "float32" else 1e-12
    for ours, theirs in zip(*results):
        assert str(ours.dtype).endswith(dtype)
        np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=tol, atol=tol)


@pytest.mark.parametrize("p", [2.0, 1.0, math.inf, 3.0])
def test_cdist_gradcheck(rng, p):
    x1 = trainkit.tensor(rng.standard_normal((3, 4)), dtype=trainkit.float64, requires_grad=True)
    x2 = trainkit.tensor(rng.standard_normal((2, 4)), dtype=trainkit.float64, requires_grad=True)
    assert gradcheck(lambda a, b: trainkit.cdist(a, b, p=p), (x1, x2))


def test_cdist_refuses_as_torch(torch):
    cases = [
        (lambda lib, dev: lib.cdist(lib.ones(2, 3), lib.ones(2, 4)), "same number of columns"),
        (lambda lib, dev: lib.cdist(lib.ones(3), lib.ones(2, 3)), "at least 2D"),
        (lambda lib, dev: lib.cdist(lib.ones(2, 3), lib.ones(2, 3), p=-1), "non-negative p"),
        (lambda lib, dev: lib.cdist(lib.ones(2, 3, dtype=lib.int64), lib.ones(2, 3, dtype=lib.int64)), "Long"),
        (lambda lib, dev: lib.cdist(lib.ones(2, 3), lib.ones(2, 3), compute_mode="x"), "compute_mode"),
    ]
    for fn, words in cases:
        assert_same_error(torch, fn, words)
    assert trainkit.cdist(trainkit.ones(2, 1, 3), trainkit.ones(4, 3)).shape == (2, 1, 4)


# ------------------------------------------------------------------------------------ process-wide settings
def test_deterministic_algorithms_as_torch(torch):
    try:
        for lib in (trainkit, torch):
            assert lib.are_deterministic_algorithms_enabled() is False
            lib.use_deterministic_algorithms(True, warn_only=True)
            assert lib.are_deterministic_algorithms_enabled() and lib.is_deterministic_algorithms_warn_only_enabled()
            assert lib.get_deterministic_debug_mode() == 1
            lib.use_deterministic_algorithms(True)
            assert lib.get_deterministic_debug_mode() == 2
            lib.use_deterministic_algorithms(False)
            assert lib.get_deterministic_debug_mode() == 0
            lib.set_deterministic_debug_mode("warn")
            assert lib.is_deterministic_algorithms_warn_only_enabled()
            lib.set_deterministic_debug_mode(0)
        assert_same_error(torch, lambda lib, dev: lib.use_deterministic_algorithms(1), "must be bool, not int")
        assert_same_error(torch, lambda lib, dev: lib.use_deterministic_algorithms(None), "must be bool")
    finally:
        trainkit.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)


def test_set_num_threads_limits_blas(torch):
    before = trainkit.get_num_threads()
    try:
        trainkit.set_num_threads(1)
        assert trainkit.get_num_threads() == 1
        blas = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert blas and set(blas) == {1}
        trainkit.set_num_threads(2)
        assert trainkit.get_num_threads() == 2
    finally:
        trainkit.set_num_threads(before)
    for bad, words in ((0, "positive integer"), (-1, "positive integer"), (2.5, "expects an int"), ("2", "int")):
        assert_same_error(torch, lambda lib, dev, bad=bad: lib.set_num_threads(bad), words)


def test_float32_matmul_precision_as_torch(torch):
    try:
        for lib in (trainkit, torch):
            assert lib.get_float32_matmul_precision() == "highest"
            lib.set_float32_matmul_precision("medium")
            assert lib.get_float32_matmul_precision() == "medium"
            with pytest.warns(UserWarning, match="bogus is not one of 'highest', 'high', or 'medium'"):
                lib.set_float32_matmul_precision("bogus")
            assert lib.get_float32_matmul_precision() == "medium"
        assert_same_error(torch, lambda lib, dev: lib.set_float32_matmul_precision(3), "expects a str")
    finally:
        trainkit.set_float32_matmul_precision("highest")
        torch.set_float32_matmul_precision("highest")


# ------------------------------------------------------------------------------------------ multiprocessing
def test_multiprocessing_has_torchs_names(torch):
    import multiprocessing

    mp = trainkit.multiprocessing
    for name in ("spawn", "start_processes", "set_start_method", "get_context", "Process", "Queue", "Pool"):
        assert hasattr(mp, name) and hasattr(torch.multiprocessing, name), name
    assert mp.Process is multiprocessing.Process and mp.get_context is multiprocessing.get_context
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()


def test_spawn_runs_and_reports_failures_in_a_program(tmp_path):
    """``torch.multiprocessing.spawn`` from a PyTorch program run by ``trainkit run-torch``: the workers run
    ``fn(i, *args)``; one that raises makes the parent raise ProcessRaisedException with its traceback."""
    worker = tmp_path / "workers.py"
    worker.write_text(
        textwrap.dedent(
            """
            import torch

            def work(i, folder):
                with open(f"{folder}/out{i}.txt", "w") as f:
                    f.write(str(float(torch.ones(2).sum()) + i))

            def fail(i):
                if i == 1:
                    raise ValueError("worker one failed")
            """
        )
    )
    script = tmp_path / "main.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import torch.multiprocessing as mp
            import workers

            if __name__ == "__main__":
                mp.spawn(workers.work, args=(sys.argv[1],), nprocs=2, start_method="fork")
                context = mp.spawn(workers.work, args=(sys.argv[1],), nprocs=1, join=False, start_method="fork")
                assert context.join()
                try:
                    mp.spawn(workers.fail, nprocs=2, start_method="fork")
                except mp.ProcessRaisedException as err:
                    print("raised:", "worker one failed" in str(err), err.error_index)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "run-torch", str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert "raised: True 1" in result.stdout
    assert (tmp_path / "out0.txt").read_text() == "2.0" and (tmp_path / "out1.txt").read_text() == "3.0"


# ---------------------------------------------------------------------------------------------- checkpoint
def make_model(lib, seed=0):
    lib.manual_seed(seed)
    return lib.nn.Sequential(
        lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Dropout(0.3), lib.nn.Linear(8, 8), lib.nn.GELU(), lib.nn.Linear(8, 2)
    )


def grads_of(lib, run, use_reentrant):
    model = make_model(lib)
    x = lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=lib.float32, requires_grad=True)
    lib.manual_seed(7)
    out = run(model, x, use_reentrant)
    (out * out).sum().backward()
    return [to_numpy(out), to_numpy(x.grad)] + [to_numpy(p.grad) for p in model.parameters()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gives_the_plain_runs_gradients(torch, use_reentrant):
    def plain(model, x, use_reentrant):
        return model(x)

    def checkpointed(model, x, use_reentrant):
        lib = trainkit if isinstance(x, trainkit.Tensor) else torch
        head = lib.utils.checkpoint.checkpoint(
            lambda t: model[2](model[1](model[0](t))), x, use_reentrant=use_reentrant
        )
        return model[5](model[4](model[3](head)))

    def sequential(model, x, use_reentrant):
        lib = trainkit if isinstance(x, trainkit.Tensor) else torch
        return lib.utils.checkpoint.checkpoint_sequential(model, 3, x, use_reentrant=use_reentrant)

    reference = grads_of(trainkit, plain, use_reentrant)
    for run in (checkpointed, sequential):
        ours = grads_of(trainkit, run, use_reentrant)
        theirs = grads_of(torch, run, use_reentrant)
        for a, b, c in zip(ours, reference, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)  # the dropout mask replayed: equal to plain
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)  # and to torch's (same seed, same masks)


def test_checkpoint_recomputes_in_backward_and_keeps_no_graph(torch):
    calls = []

    def piece(t):
        calls.append(trainkit.is_grad_enabled())
        return (t * t).sin()

    x = trainkit.tensor([1.0, 2.0], requires_grad=True)
    y = trainkit.utils.checkpoint.checkpoint(piece, x, use_reentrant=True)
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward" and calls == [False]
    y.sum().backward()
    assert calls == [False, True]
    np.testing.assert_allclose(to_numpy(x.grad), 2 * np.array([1.0, 2.0]) * np.cos([1.0, 4.0]), rtol=1e-6)


def test_checkpoint_arguments_as_torch(torch):
    x = trainkit.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        trainkit.utils.checkpoint.checkpoint(lambda t: t * 2, x)
    assert_same_error(
        torch,
        lambda lib, dev: lib.utils.checkpoint.checkpoint(lambda t, foo: t, lib.ones(1), use_reentrant=True, foo=1),
        "Unexpected keyword arguments: foo",
    )
    out = trainkit.utils.checkpoint.checkpoint(lambda t, k: t * k, x, use_reentrant=False, k=3)
    out.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        trainkit.utils.checkpoint.checkpoint(lambda t: t * 2, trainkit.ones(2), use_reentrant=True)
    # non-reentrant: parameters inside get gradients although the input does not require grad
    layer = nn.Linear(2, 1)
    trainkit.utils.checkpoint.checkpoint(layer, trainkit.ones(3, 2), use_reentrant=False).sum().backward()
    assert layer.weight.grad.tolist() == [[3.0, 3.0]]


# ---------------------------------------------------------------------------------------- accelerator etc.
def test_accelerator_on_the_cpu_as_torch(torch):
    if trainkit.cuda.is_available():
        assert trainkit.accelerator.current_accelerator().type == "cuda"
        return
    assert trainkit.accelerator.current_accelerator() is None is torch.accelerator.current_accelerator()
    assert trainkit.accelerator.is_available() is False is torch.accelerator.is_available()
    assert trainkit.accelerator.device_count() == 0 == torch.accelerator.device_count()
    trainkit.accelerator.synchronize()


def test_private_base_classes_of_batchnorm_and_dropout(torch):
    for lib in (trainkit, torch):
        from_batchnorm = __import__(f"{lib.__name__}.nn.modules.batchnorm", fromlist=["_BatchNorm"])
        from_dropout = __import__(f"{lib.__name__}.nn.modules.dropout", fromlist=["_DropoutNd"])
        base_bn, base_do = from_batchnorm._BatchNorm, from_dropout._DropoutNd
        assert isinstance(lib.nn.BatchNorm1d(3), base_bn) and isinstance(lib.nn.BatchNorm2d(3), base_bn)
        assert not isinstance(lib.nn.LayerNorm(3), base_bn)
        for cls in (lib.nn.Dropout, lib.nn.Dropout1d, lib.nn.Dropout2d, lib.nn.Dropout3d):
            assert isinstance(cls(0.2), base_do)

        class Frozen(base_bn):  # the subclass a program writes: batch norm that always uses running statistics
            def __init__(self, n):
                super().__init__(n)

            def _check_input_dim(self, x):
                pass

        layer = Frozen(2)
        assert set(dict(layer.named_buffers())) == {"running_mean", "running_var", "num_batches_tracked"}


def test_torch_compile_accepts_torchs_arguments():
    model = nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = trainkit.compile(model, fullgraph=False, dynamic=None, mode="default", backend="inductor")
    out = compiled(trainkit.ones(1, 2))
    np.testing.assert_allclose(to_numpy(out), to_numpy(model(trainkit.ones(1, 2))))
    assert trainkit.compile(model, disable=True)(trainkit.ones(1, 2)).shape == (1, 2)


# ------------------------------------------------------------------------------------------------- LBFGS
def lbfgs_run(lib, dtype, line_search_fn, steps=3):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((20, 3)), dtype=dtype)
    y = lib.tensor(rng.standard_normal((20, 1)), dtype=dtype)
    w1 = lib.tensor(rng.standard_normal((3, 8)) * 0.5, dtype=dtype, requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((8, 1)) * 0.5, dtype=dtype, requires_grad=True)
    opt = lib.optim.LBFGS([w1, w2], lr=0.8, line_search_fn=line_search_fn, history_size=5, max_iter=10)

    def closure():
        opt.zero_grad()
        loss = ((lib.tanh(x @ w1) @ w2 - y) ** 2).mean()
        loss.backward()
        return loss

    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    state = opt.state[w1]
    return losses, (state["func_evals"], state["n_iter"]), to_numpy(w1), to_numpy(w2)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_follows_torch(torch, line_search_fn):
    ours = lbfgs_run(trainkit, trainkit.float64, line_search_fn)
    theirs = lbfgs_run(torch, torch.float64, line_search_fn)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10)
    assert ours[1] == theirs[1]  # the same evaluations and iterations: the same decisions all along
    for a, b in zip(ours[2:], theirs[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    ours32 = lbfgs_run(trainkit, trainkit.float32, line_search_fn)
    theirs32 = lbfgs_run(torch, torch.float32, line_search_fn)
    np.testing.assert_allclose(ours32[0], theirs32[0], rtol=2e-3)  # float32 rounding grows over 30 iterations
    assert ours32[0][-1] < ours32[0][0] / 2


def test_lbfgs_refuses_as_torch(torch):
    def groups(lib, dev):
        lib.optim.LBFGS([{"params": [lib.ones(1, requires_grad=True)]}, {"params": [lib.ones(1, requires_grad=True)]}])

    assert_same_error(torch, groups, "LBFGS doesn't support per-parameter options")
    assert_same_error(
        torch, lambda lib, dev: lib.optim.LBFGS([lib.ones(1, requires_grad=True)], lr=-1.0), "Invalid learning rate"
    )

    def bad_search(lib, dev):
        w = lib.ones(2, requires_grad=True)
        opt = lib.optim.LBFGS([w], line_search_fn="backtracking")

        def closure():
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            return loss

        opt.step(closure)

    assert_same_error(torch, bad_search, "only 'strong_wolfe' is supported")
    assert trainkit.optim.LBFGS([trainkit.ones(1, requires_grad=True)], max_iter=8).defaults["max_eval"] == 10


# ---------------------------------------------------------------------------------------- on every device
def test_checkpoint_and_cdist_on_each_device(device):
    """Dropout inside a checkpoint draws from the input's device stream: the recomputation replays it there, so
    the gradients are the plain run's on a GPU too; cdist and the accelerator's answer on that device."""
    results = []
    for wrapped in (False, True):
        trainkit.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Tanh(), nn.Linear(16, 1)).to(device)
        x = trainkit.ones(8, 4, device=device, requires_grad=True)
        trainkit.manual_seed(1)
        out = trainkit.utils.checkpoint.checkpoint(model, x, use_reentrant=False) if wrapped else model(x)
        out.sum().backward()
        results.append([to_numpy(x.grad)] + [to_numpy(p.grad) for p in model.parameters()])
    for plain, wrapped in zip(*results):
        np.testing.assert_allclose(wrapped, plain, rtol=1e-6, atol=1e-7)
    a = trainkit.tensor([[0.0, 0.0], [3.0, 4.0]], device=device, requires_grad=True)
    d = trainkit.cdist(a, trainkit.tensor([[0.0, 0.0]], device=device), p=2.0)
    d.sum().backward()
    assert d.device.type == device and to_numpy(d).ravel().tolist() == [0.0, 5.0]
    np.testing.assert_allclose(to_numpy(a.grad), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)
    expected = None if device == "cpu" and not trainkit.cuda.is_available() else "cuda"
    accelerator = trainkit.accelerator.current_accelerator()
    assert (accelerator.type if accelerator is not None else None) == expected
