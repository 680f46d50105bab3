"""Data-parallel training: the world of one under plain pytest, and real two-rank jobs launched with mpiexec."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_error

import trainkit
import trainkit.distributed as dist
import trainkit.training.checkpoint
from trainkit import Trainer, nn, optim
from trainkit.cli.config import ConfigError
from trainkit.cli.config import load as load_config
from trainkit.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset
from trainkit.distributed import GradientReducer, ShardedBatchSampler, World, shard_bounds

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "mpi_scripts"


# ------------------------------------------------------------------------------------------- world of one
def test_without_launcher_the_world_is_this_process(monkeypatch):
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "MPI_LOCALNRANKS"):
        monkeypatch.delenv(name, raising=False)
    assert dist.launched_size() == 1
    w = World()
    assert (w.rank, w.size, w.comm) == (0, 1, None)
    a = np.arange(3.0)
    assert w.allreduce(a) is a and a.tolist() == [0.0, 1.0, 2.0]
    assert w.gather_object("x") == ["x"] and w.broadcast_object(5) == 5
    t = trainkit.ones(2)
    version = t._version
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0] and t._version == version + 1


def test_launcher_without_mpi4py_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as if not installed
    with pytest.raises(RuntimeError, match=r"pip install 'trainkit\[distributed\]'"):
        World()


def test_init_process_group_rejects_other_backends():
    with pytest.raises(ValueError, match="'nccl' is not supported"):
        dist.init_process_group("nccl")


@pytest.mark.parametrize("n,world_size", [(7, 2), (8, 2), (5, 3), (1, 3), (0, 2)])
def test_shards_cover_each_batch_once(n, world_size):
    bounds = [shard_bounds(n, r, world_size) for r in range(world_size)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [stop - start for start, stop in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_sharded_batch_sampler_splits_every_batch():
    batches = BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False)
    shards = [list(ShardedBatchSampler(batches, r, 3)) for r in range(3)]
    assert shards == [[[0, 1], [4, 5], [8]], [[2], [6], [9]], [[3], [7], []]]
    sampler = ShardedBatchSampler(batches, 2, 3)
    for _ in sampler:
        pass
    assert sampler.last_sizes == (0, 2) and len(sampler) == 3 and sampler.first_batch == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"rank must be in \[0, 3\)"):
        ShardedBatchSampler(batches, 3, 3)


class _Doubling:
    """A stand-in for two ranks holding the same grads: the sum is twice this rank's."""

    rank, size = 0, 2

    def allreduce(self, array, op=None):
        array *= 2
        return array


def test_reducer_averages_in_buckets_and_skips_frozen_parameters():
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model[0].bias.requires_grad_(False)
    model(trainkit.randn(5, 3)).square().sum().backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    reducer = GradientReducer(model.parameters(), bucket_cap_mb=40 / 2**20, group=_Doubling())  # 40 bytes
    reducer.reduce()
    assert [len(b.params) for b in reducer.buckets] == [1, 2]  # 48 bytes alone, then 32 + 8
    assert all(b.buffer.dtype == np.float32 for b in reducer.buckets)
    for name, p in model.named_parameters():
        if name == "0.bias":
            assert p.grad is None
        else:
            np.testing.assert_array_equal(p.grad.numpy(), before[name].numpy())


def test_reducer_leaves_a_grad_no_rank_has_and_rebuilds_after_unfreezing():
    a, b = nn.Parameter(trainkit.ones(2)), nn.Parameter(trainkit.ones(3))
    b.requires_grad_(False)
    (a * 3).sum().backward()
    reducer = GradientReducer([a, b], group=_Doubling())
    reducer.reduce()
    assert a.grad.tolist() == [3.0, 3.0] and b.grad is None
    b.requires_grad_(True)
    reducer.reduce()
    assert b.grad is None and sum(len(k.params) for k in reducer.buckets) == 2  # no rank had one: still None


def test_ddp_strategy_in_a_world_of_one_trains_as_a_single_process():
    def run(strategy):
        trainkit.manual_seed(0)
        model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        x, y = trainkit.randn(40, 2), trainkit.randn(40, 1)
        trainer = Trainer(
            model, optim.SGD(model.parameters(), lr=0.1, momentum=0.9), "mse", seed=0, verbose=False, strategy=strategy
        )
        trainer.fit(x, y, epochs=2, batch_size=8)
        return [p.detach().numpy() for p in model.parameters()], trainer

    ddp, trainer = run("ddp")
    single, _ = run("single_device")
    assert trainer.strategy == "ddp" and trainer.world_size == 1
    for a, b in zip(ddp, single):
        np.testing.assert_array_equal(a, b)
    assert Trainer(nn.Linear(1, 1), verbose=False).strategy == "single_device"  # auto, no launcher
    with pytest.raises(ValueError, match="strategy must be"):
        Trainer(nn.Linear(1, 1), strategy="dp")


def test_ddp_wrapper_in_a_world_of_one():
    trainkit.manual_seed(0)
    inner = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model = nn.parallel.DistributedDataParallel(inner)
    assert model.module is inner and list(model.state_dict())[0] == "module.0.weight"
    x = trainkit.randn(5, 3)
    with model.no_sync():
        model(x).sum().backward()
    model(x).sum().backward()
    reference = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    reference.load_state_dict(inner.state_dict())
    (reference(x).sum() * 2).backward()
    for a, b in zip(inner.parameters(), reference.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match=r"find_unused_parameters=True\) is not supported"):
        nn.parallel.DistributedDataParallel(inner, find_unused_parameters=True)


def test_ddp_wrapper_reports_parameters_left_out_of_the_loss():
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 1), nn.Linear(2, 1)

        def forward(self, x):
            return self.a(x), self.b(x)

    model = dist.DistributedDataParallel(TwoHeads())
    model(trainkit.ones(1, 2))[0].sum().backward()  # head b takes no part
    with pytest.raises(
        RuntimeError,
        match=r"finished reduction in the prior iteration.*2 of 4 trainable parameters"
        r" got no gradient in the last backward \(b.weight, b.bias\)",
    ):
        model(trainkit.ones(1, 2))


def test_checkpoint_of_another_world_size_is_refused(tmp_path):
    trainer = Trainer(nn.Linear(1, 1), verbose=False)
    path = trainer.save_checkpoint(tmp_path / "c.npz")
    state = trainkit.training.checkpoint.load(path)
    state["world_size"] = 2
    trainkit.training.checkpoint.save(state, path)
    with pytest.raises(RuntimeError, match=r"written by a run of 2 process\(es\); resume it with the same number"):
        trainer.load_checkpoint(path, resume=True)
    assert trainer.load_checkpoint(path) == 0  # for evaluation, any number of processes will do


def test_strategy_in_config_is_checked(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "model: {class_path: trainkit.nn.Identity}\ndata: {kind: regression_curve}\ntrainer: {strategy: dpp}\n"
    )
    with pytest.raises(ConfigError, match=r"c.yaml: 'trainer.strategy' must be one of auto, ddp, single_device"):
        load_config(cfg)


def test_dataloader_takes_torch_worker_options_and_batch_sampler(torch):
    ds = TensorDataset(trainkit.arange(6.0))
    loader = DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True, persistent_workers=True, prefetch_factor=2)
    assert loader.num_workers == 2 and [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    loader = DataLoader(ds, batch_sampler=[[5, 0], [1]])
    assert [b[0].tolist() for b in loader] == [[5.0, 0.0], [1.0]] and len(loader) == 2

    def data_of(lib):
        return lib.utils.data

    for kwargs, fragment in [
        ({"num_workers": -1}, "non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor"),
        ({"persistent_workers": True}, "persistent_workers"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "mutually exclusive"),
    ]:
        assert_same_error(torch, lambda lib, dev, kw=kwargs: data_of(lib).DataLoader(range(3), **kw), fragment)


# ------------------------------------------------------------------------------------ two ranks, for real
def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(
    not dist.is_available() or _mpiexec() is None,
    reason="mpi4py and an mpiexec launcher are needed (pip install 'trainkit[distributed]')",
)


def _run(args: list[str], cwd: Path, ranks: int | None = 2, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["OPENBLAS_NUM_THREADS"] = "1"
    cmd = ([_mpiexec(), "-n", str(ranks)] if ranks else []) + args
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@needs_mpi
def test_two_ranks_equal_one_process(tmp_path):
    script = str(SCRIPTS / "train_mlp.py")
    for mode, ranks in (("ddp", 2), ("wrapped", 2), ("accumulate", None), ("single", None)):
        done = _run([sys.executable, script, mode, "64", str(tmp_path / f"{mode}.npz")], tmp_path, ranks)
        assert done.returncode == 0, done.stderr
    ddp, wrapped, accumulate, single = (
        np.load(tmp_path / f"{m}.npz") for m in ("ddp", "wrapped", "accumulate", "single")
    )
    assert int(ddp["steps"]) == int(single["steps"]) == 8
    for key in ddp.files:
        np.testing.assert_array_equal(ddp[key], wrapped[key], err_msg=key)  # the DDP wrapper's hooks, same sums
        # the same sums in the same order: bitwise equal to one process adding two half-batches
        np.testing.assert_array_equal(ddp[key], accumulate[key], err_msg=key)
        # and, up to float32 rounding, to one process on whole batches
        np.testing.assert_allclose(ddp[key], single[key], rtol=1e-5, atol=1e-6, err_msg=key)


def _assert_ranks_match_one_process(tmp_path, command, parallel: tuple[str, int], single: str) -> None:
    """Run tests/mpi_scripts/``command(mode, output)`` in ``parallel`` = (mode, ranks) and in the ``single`` mode on
    one process; every array the two runs save must agree."""
    for mode, ranks in (parallel, (single, None)):
        script, *args = command(mode, str(tmp_path / f"{mode}.npz"))
        done = _run([sys.executable, str(SCRIPTS / script), *args], tmp_path, ranks)
        assert done.returncode == 0, done.stderr
    ddp, one = np.load(tmp_path / f"{parallel[0]}.npz"), np.load(tmp_path / f"{single}.npz")
    for key in ddp.files:
        np.testing.assert_allclose(ddp[key], one[key], rtol=1e-5, atol=1e-6, err_msg=key)


@needs_mpi
def test_two_ranks_with_unequal_shares_match_one_process(tmp_path):
    # 61 samples: last batches of 13, cut 7 + 6
    _assert_ranks_match_one_process(tmp_path, lambda mode, out: ["train_mlp.py", mode, "61", out], ("ddp", 2), "single")


@needs_mpi
def test_command_under_mpiexec_writes_once_and_resumes(tmp_path):
    config = str(ROOT / "configs" / "regression.yaml")
    common = ["--set", f"output_dir={tmp_path / 'runs'}"]
    trainkit_cmd = [sys.executable, "-m", "trainkit.cli", "train", config]
    done = _run(trainkit_cmd + common + ["--set", "trainer.epochs=4", "--set", "name=whole"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("done: 4 epochs") == 1  # rank 0 alone reports
    rows = (tmp_path / "runs" / "whole" / "version_0" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 5  # a header and one row an epoch, not two

    half = _run(trainkit_cmd + common + ["--set", "trainer.epochs=2", "--set", "name=split"], tmp_path)
    assert half.returncode == 0, half.stderr
    resumed = _run(
        trainkit_cmd
        + common
        + ["--set", "trainer.epochs=4", "--set", "name=split", "--resume", str(tmp_path / "runs" / "split")],
        tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    whole = trainkit.training.checkpoint.load(tmp_path / "runs" / "whole" / "version_0" / "checkpoints" / "last.npz")
    split = trainkit.training.checkpoint.load(tmp_path / "runs" / "split" / "version_0" / "checkpoints" / "last.npz")
    assert whole["world_size"] == 2 and len(whole["rng"]["ranks"]) == 2
    for name, value in whole["model"].items():
        np.testing.assert_array_equal(value.numpy(), split["model"][name].numpy(), err_msg=name)

    alone = _run(
        trainkit_cmd
        + common
        + ["--set", "trainer.epochs=6", "--set", "name=split", "--resume", str(tmp_path / "runs" / "split")],
        tmp_path,
        ranks=None,
    )
    assert alone.returncode == 1 and "resume it with the same number (this run has 1)" in alone.stderr


@needs_mpi
def test_a_failing_rank_ends_the_job_instead_of_hanging(tmp_path):
    done = _run([sys.executable, str(SCRIPTS / "fail_on_rank1.py")], tmp_path, timeout=60)
    assert done.returncode != 0
    assert "rank 1 of 2: training failed with ValueError: broken batch on purpose; aborting all 2 ranks" in (
        done.stderr + done.stdout
    )
    assert 'raise ValueError("broken batch on purpose")' in done.stderr  # the traceback, as Python shows one


def _train_fragile(tmp_path, model: str, debug: bool):
    """``trainkit train`` on 2 ranks of a config whose model (``file:Class`` in tests/mpi_scripts) fails on rank 1."""
    path, cls = model.split(":")
    config = tmp_path / "fragile.yaml"
    config.write_text(
        f"model: {{class_path: '{SCRIPTS / path}:{cls}'}}\ndata: {{kind: regression_curve}}\noutput_dir: '{tmp_path}'\n"
    )
    args = [sys.executable, "-m", "trainkit.cli"] + (["--debug"] if debug else []) + ["train", str(config)]
    return _run(args, tmp_path, timeout=60)


@needs_mpi
@pytest.mark.parametrize("debug", [False, True])
def test_command_failing_on_one_rank_in_training_shows_the_traceback_only_with_debug(tmp_path, debug):
    done = _train_fragile(tmp_path, "fragile_forward.py:FragileForward", debug)
    assert done.returncode != 0
    assert "rank 1 of 2: training failed with ValueError: broken batch on purpose; aborting all 2 ranks" in done.stderr
    assert ("Traceback" in done.stderr) is debug


@needs_mpi
def test_data_parallel_benchmark_runs(capsys):
    from benchmarks import ddp_step

    assert ddp_step.main(["--steps", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0:2] for row in rows] == [["| 1", "1"], ["| 1", "2"], ["| 2", "1"]]


@needs_mpi
def test_validation_is_reduced_over_ranks(tmp_path):
    """Each rank evaluates its share of the validation data; the reduced figures equal one process's."""
    config = str(ROOT / "configs" / "regression.yaml")
    args = [
        sys.executable,
        "-m",
        "trainkit.cli",
        "train",
        config,
        "--set",
        f"output_dir={tmp_path}",
        "--set",
        "trainer.epochs=2",
        "--set",
        "data.validation_split=0.25",
        "--set",
        "trainer.verbose=false",
    ]
    lines = []
    for ranks in (3, None):
        done = _run(args, tmp_path, ranks)
        assert done.returncode == 0, done.stderr
        done_line = next(line for line in done.stdout.splitlines() if line.startswith("done:"))
        lines.append(done_line.partition("; run folder")[0])  # each run has a version folder of its own
    assert lines[0] == lines[1] and "val_mae" in lines[0]


@needs_mpi
@pytest.mark.parametrize("case", ["empty", "wrapped", "unused"])
def test_corner_cases_match_one_process(tmp_path, case):
    """3 ranks on batches of 4 out of 10 samples: the last batch leaves rank 2 nothing; collated samples, the
    DistributedDataParallel wrapper, and a parameter no rank has a grad for (which weight decay must not move)."""
    _assert_ranks_match_one_process(
        tmp_path, lambda mode, out: ["edge_cases.py", case, mode, out], ("ddp", 3), "single_device"
    )


@needs_mpi
def test_batchnorm_statistics_stay_the_same_on_every_rank(tmp_path):
    done = _run([sys.executable, str(SCRIPTS / "edge_cases.py"), "bn", "ddp", str(tmp_path / "bn.npz")], tmp_path)
    assert done.returncode == 0, done.stderr
    means = np.load(tmp_path / "bn.npz")["ranks_running_mean"]
    np.testing.assert_array_equal(means[0], means[1])


@needs_mpi
def test_a_failure_outside_fit_ends_the_job_too(tmp_path):
    done = _run(
        [sys.executable, str(SCRIPTS / "edge_cases.py"), "fail_eval", "ddp", str(tmp_path / "x.npz")],
        tmp_path,
        timeout=60,
    )
    assert done.returncode != 0
    assert "rank 1 of 2: uncaught ValueError: evaluation broke on purpose; aborting all 2 ranks" in done.stderr


@needs_mpi
@pytest.mark.parametrize("debug", [False, True])
def test_command_failing_on_one_rank_before_training_ends_the_job(tmp_path, debug):
    done = _train_fragile(tmp_path, "fragile_model.py:FragileNet", debug)
    assert done.returncode != 0
    assert "rank 1 of 2: error: ValueError: cannot build on rank 1; aborting all 2 ranks" in done.stderr


def test_abort_ends_the_job_even_when_a_second_interrupt_cuts_its_pause_short(monkeypatch, capsys):
    from trainkit.distributed import comm as comm_mod

    aborted = []

    class FakeComm:
        def Abort(self, code):  # noqa: N802  (mpi4py's name)
            aborted.append(code)

    group = comm_mod.World()
    group.comm, group.rank, group.size = FakeComm(), 1, 2

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(comm_mod.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        group.abort("interrupted", 130, detail="Traceback (most recent call last): ...\n")
    assert aborted == [130]
    err = capsys.readouterr().err
    assert err == ("Traceback (most recent call last): ...\ntrainkit: rank 1 of 2: interrupted; aborting all 2 ranks\n")


@needs_mpi
def test_a_config_error_on_one_rank_ends_the_job(tmp_path):
    done = _train_fragile(tmp_path, "fragile_import.py:Net", False)
    assert done.returncode == 2, done.stderr
    assert "rank 1 of 2: config error:" in done.stderr and "a_module_only_rank_0_has" in done.stderr
    assert "aborting all 2 ranks" in done.stderr


@needs_mpi
def test_a_collective_that_waits_past_its_timeout_ends_the_job(tmp_path):
    started = time.monotonic()
    done = _run([sys.executable, str(SCRIPTS / "stuck_rank.py")], tmp_path, timeout=60)
    assert time.monotonic() - started < 40
    assert done.returncode != 0
    assert "rank 0 of 2: a collective (allreduce) waited more than 2 s for the other ranks" in done.stderr
    assert "the allreduce completed" not in done.stdout


@needs_mpi
def test_training_with_a_collective_timeout_runs_as_without(tmp_path):
    args = [
        sys.executable,
        "-m",
        "trainkit.cli",
        "train",
        str(ROOT / "configs" / "regression.yaml"),
        "--set",
        "trainer.epochs=3",
        "--set",
        "trainer.collective_timeout_s=30",
        "--set",
        f"output_dir={tmp_path}",
    ]
    done = _run(args, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "done: 3 epochs" in done.stdout
