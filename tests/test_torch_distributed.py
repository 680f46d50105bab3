"""torch.distributed over MPI: a torchrun program run unchanged by ``trainkit run-torch --nproc N`` and by
``mpiexec -n N trainkit run-torch`` gives torch's results; every collective matches torch's on 2 ranks; the errors
are torch's."""

from __future__ import annotations

import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_error

import trainkit
import trainkit.distributed as dist
from trainkit.cli import run_torch
from trainkit.distributed import process_group
from trainkit.utils.data.distributed import DistributedSampler

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "mpi_scripts"
TRAIN = SCRIPTS / "torch_ddp_train.py"
COLLECTIVES = SCRIPTS / "torch_collectives.py"
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def torchrun() -> str | None:
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.exists() else shutil.which("torchrun")


needs_mpi = pytest.mark.skipif(
    not dist.is_available() or mpiexec() is None,
    reason="mpi4py and an mpiexec launcher are needed (pip install 'trainkit[distributed]')",
)
needs_torchrun = pytest.mark.skipif(torchrun() is None, reason="torch's torchrun is needed for the reference runs")


def env() -> dict:
    """The environment a user's shell gives: no launcher's variables left over from the test run."""
    clean = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES and not k.startswith(("PMI", "OMPI"))}
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return clean


def launch(args: list[str], cwd: Path, timeout: int = 180, extra: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        args, capture_output=True, text=True, cwd=cwd, timeout=timeout, env={**env(), **(extra or {})}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def with_torch(nproc: int, script: Path, out: Path) -> subprocess.CompletedProcess:
    return launch([torchrun(), f"--nproc_per_node={nproc}", str(script), str(out)], out.parent)


def with_trainkit(how: str, nproc: int, script: Path, out: Path) -> subprocess.CompletedProcess:
    if how == "command":
        args = [sys.executable, "-m", "trainkit.cli", "run-torch", "--nproc", str(nproc)]
    elif how == "module":
        args = [sys.executable, "-m", "trainkit.torch_run", f"--nproc_per_node={nproc}"]
    else:  # the user's own mpiexec
        args = [mpiexec(), "-n", str(nproc), sys.executable, "-m", "trainkit.cli", "run-torch"]
    return launch([*args, str(script), str(out)], out.parent)


# ------------------------------------------------------------------------------------- a torchrun program
@pytest.fixture(scope="module")
def torch_losses(tmp_path_factory) -> dict:
    """The reference: the training program under torchrun on 2 ranks, and as one process (here, with the variables
    torchrun would set)."""
    if torchrun() is None:
        pytest.skip("torch's torchrun is needed for the reference runs")
    folder = tmp_path_factory.mktemp("torch")
    with_torch(2, TRAIN, folder / "n2")
    alone = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    alone["MASTER_PORT"] = free_url().rpartition(":")[2]
    with pytest.MonkeyPatch.context() as patch:
        for name, value in alone.items():
            patch.setenv(name, value)
        patch.setattr(sys, "argv", [str(TRAIN), str(folder / "n1")])
        runpy.run_path(str(TRAIN), run_name="__main__")
    return {n: json.loads((folder / f"n{n}.json").read_text())["losses"] for n in (2, 1)}


@needs_mpi
@needs_torchrun
@pytest.mark.parametrize("how", ["module", "mpiexec", "command"])
def test_torchrun_program_runs_unchanged_and_trains_as_torch(tmp_path, torch, torch_losses, how):
    done = with_trainkit(how, 2, TRAIN, tmp_path / "out")
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["world_size"] == 2 and result["keys"] == [
        "module.0.weight",
        "module.0.bias",
        "module.2.weight",
        "module.2.bias",
    ]
    np.testing.assert_allclose(result["losses"], torch_losses[2], rtol=1e-5)
    assert result["losses"][-1] < 0.6 * result["losses"][0]  # it trains
    assert done.stdout.count("epoch 4 loss") == 1  # rank 0 alone prints
    # what rank 0 saved is a state dict torch loads
    state = torch.load(tmp_path / "out.pt", weights_only=True)
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"] and state["0.weight"].shape == (32, 4)


@needs_mpi
@needs_torchrun
def test_two_ranks_equal_one_process_as_in_torch(tmp_path, torch_losses):
    # torch's 2 ranks of 8 samples give its 1 process of 16, to float rounding: so do trainkit's
    np.testing.assert_allclose(torch_losses[2], torch_losses[1], rtol=1e-5)
    with_trainkit("module", 1, TRAIN, tmp_path / "one")
    one = json.loads((tmp_path / "one.json").read_text())["losses"]
    np.testing.assert_allclose(one, torch_losses[1], rtol=1e-5)


@needs_mpi
def test_a_failing_rank_ends_the_job(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 1:\n"
        "    sys.exit(int(sys.argv[1]))\n"
        "dist.barrier()  # rank 0 would wait here for ever\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainkit.torch_run", "--nproc", "2", str(script), "3"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert done.returncode != 0 and "rank 1 of 2: exit status 3; aborting all 2 ranks" in done.stderr


@needs_mpi
def test_init_timeout_ends_a_job_whose_rank_is_stuck(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(
        "import datetime, time, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=1))\n"
        "t = torch.ones(2)\n"
        "dist.all_reduce(t)\n"
        "if dist.get_rank() == 1:\n"
        "    time.sleep(30)\n"
        "dist.barrier()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainkit.torch_run", "--nproc", "2", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert done.returncode != 0
    assert "rank 0 of 2: a collective (barrier) waited more than 1 s for the other ranks" in done.stderr
    assert done.stderr.count("aborting all 2 ranks") == 1


# ------------------------------------------------------------------------------------- the collectives
@needs_mpi
@needs_torchrun
def test_every_collective_gives_torchs_results_on_two_ranks(tmp_path):
    with_torch(2, COLLECTIVES, tmp_path / "torch")
    with_trainkit("module", 2, COLLECTIVES, tmp_path / "trainkit")
    for rank in (0, 1):
        expected = json.loads((tmp_path / f"torch.rank{rank}.json").read_text())
        got = json.loads((tmp_path / f"trainkit.rank{rank}.json").read_text())
        assert sorted(got) == sorted(expected)
        for case, value in expected.items():
            if isinstance(value, dict) and "error" in value:  # the same kind of error; messages may differ
                assert got[case]["error"] == value["error"], (case, got[case], value)
            else:
                assert got[case] == value, (rank, case)
        assert got["error double init"]["message"] == "trying to initialize the default process group twice!"
        assert got["get_rank after destroy"]["message"] == expected["get_rank after destroy"]["message"]


# ----------------------------------------------------------------------------- one process, against torch
def free_url() -> str:
    """A tcp:// address nothing listens on, for a one-process group."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def fresh_groups(torch, monkeypatch):
    """No default group in either library, and trainkit as in a fresh process (no world joined, no group ever
    made); all restored after."""
    monkeypatch.setattr(trainkit.distributed.comm, "_world", None)
    monkeypatch.setattr(process_group._Default, "strict", False)
    for lib in (torch.distributed, dist):
        if lib.is_initialized():
            lib.destroy_process_group()
    yield
    for lib in (torch.distributed, dist):
        if lib.is_initialized():
            lib.destroy_process_group()


def test_queries_before_init_raise_torchs_error(torch, fresh_groups, monkeypatch):
    for query in ("get_rank", "get_world_size", "get_backend"):
        assert_same_error(
            torch,
            lambda lib, _dev, q=query: getattr(lib.distributed, q)(),
            "Default process group has not been initialized",
        )
    assert not dist.is_initialized() and dist.group.WORLD is None


def test_init_twice_and_destroy_twice(torch, fresh_groups, monkeypatch):
    def twice(lib, _dev):
        url = free_url()
        lib.distributed.init_process_group("gloo", url, rank=0, world_size=1)
        try:
            lib.distributed.init_process_group("gloo", url, rank=0, world_size=1)
        finally:
            lib.distributed.destroy_process_group()

    assert_same_error(torch, twice, "trying to initialize the default process group twice!")
    assert_same_error(torch, lambda lib, _dev: lib.distributed.destroy_process_group(), "Process group cannot be None")


def test_env_init_reads_torchrun_variables(torch, fresh_groups, monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert_same_error(torch, lambda lib, _dev: lib.distributed.init_process_group("gloo"), "environment variable RANK")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert_same_error(torch, lambda lib, _dev: lib.distributed.init_process_group("gloo"), "MASTER_ADDR expected")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", free_url().rpartition(":")[2])
    dist.init_process_group()  # no backend named: torch calls it undefined
    assert dist.is_initialized() and dist.get_backend() == "undefined" and dist.group.WORLD is not None
    assert (dist.get_rank(), dist.get_world_size(), dist.new_group().size()) == (0, 1, 1)
    dist.destroy_process_group()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match=r"world_size is 2, but the launcher started 1 process.*--nproc 2"):
        dist.init_process_group("gloo")


def test_backends_and_arguments_refused_as_torch(torch, fresh_groups):
    def init(**kwargs):
        return lambda lib, _dev: lib.distributed.init_process_group(
            **{"init_method": free_url(), "rank": 0, "world_size": 1, **kwargs}
        )

    assert_same_error(torch, init(backend="gloo", timeout=5), "Expected timeout argument to be of type")
    assert_same_error(torch, init(backend="nccl"), "Distributed package doesn't have NCCL built in")
    assert_same_error(torch, init(backend="foo"), "Unknown backend type foo")
    assert_same_error(torch, init(backend="gloo", init_method="foo://x"), "No rendezvous handler for foo://")
    with pytest.raises(ValueError, match="'nccl' is not supported"):  # trainkit's earlier error still catches it
        dist.init_process_group("nccl")


def test_collective_errors_in_one_process_as_torch(torch, fresh_groups):
    def in_group(body):
        def run(lib, _dev):
            lib.distributed.init_process_group("gloo", free_url(), rank=0, world_size=1)
            try:
                body(lib)
            finally:
                lib.distributed.destroy_process_group()

        return run

    assert_same_error(
        torch,
        in_group(lambda lib: lib.distributed.all_reduce(lib.ones(2, dtype=lib.int64), op=lib.distributed.ReduceOp.AVG)),
        "can't be cast to the desired output type Long",
    )
    assert_same_error(
        torch,
        in_group(lambda lib: lib.distributed.all_reduce(lib.ones(2), op=lib.distributed.ReduceOp.BOR)),
        "Cannot use ReduceOp.BOR with non-integral dtype",
    )
    assert_same_error(torch, in_group(lambda lib: lib.distributed.all_reduce(lib.ones(2), op="sum")))
    assert_same_error(torch, in_group(lambda lib: lib.distributed.broadcast(lib.ones(2), src=3)), "invalid root rank")
    with pytest.raises(NotImplementedError, match=r"new_group\(ranks=\[0, 5\]\).*subgroup is not supported"):
        in_group(lambda lib: lib.distributed.new_group([0, 5]))(trainkit, "cpu")


def test_async_work_and_reduce_op_names(fresh_groups):
    dist.init_process_group("gloo", free_url(), rank=0, world_size=1)
    t = trainkit.tensor([1.0, 2.0])
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    assert work.wait() is True and work.is_completed() and work.result()[0] is t
    assert t.tolist() == [1.0, 2.0] and {op.name for op in dist.ReduceOp} >= {"SUM", "AVG", "BAND", "BOR", "BXOR"}


# ------------------------------------------------------------------------------------- DistributedSampler
@pytest.mark.parametrize("n", [0, 1, 7, 10, 13])
@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_distributed_sampler_gives_torchs_indices(torch, n, replicas, shuffle, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler

    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=5, drop_last=drop_last)
        theirs = TorchSampler(range(n), replicas, rank, shuffle=shuffle, seed=5, drop_last=drop_last)
        for epoch in (0, 1, 7):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_sampler_errors_as_torch(torch, fresh_groups):
    assert_same_error(
        torch,
        lambda lib, _dev: lib.utils.data.distributed.DistributedSampler(range(4), num_replicas=2, rank=2),
        "Invalid rank 2, rank should be in the interval [0, 1]",
    )
    assert_same_error(
        torch, lambda lib, _dev: lib.utils.data.distributed.DistributedSampler(range(4)), "has not been initialized"
    )


# ------------------------------------------------------------------------------------------- the wrapper
def test_ddp_takes_torchs_arguments_and_switches():
    model = trainkit.nn.parallel.DistributedDataParallel(
        trainkit.nn.Linear(2, 1), bucket_cap_mb=None, static_graph=True
    )
    assert list(model.state_dict()) == ["module.weight", "module.bias"] and model.require_backward_grad_sync
    with model.no_sync():
        assert model.require_backward_grad_sync is False
    with pytest.raises(ValueError, match="device_ids and output_device arguments only work with"):
        trainkit.nn.parallel.DistributedDataParallel(trainkit.nn.Linear(2, 1), device_ids=[0])


def test_nproc_option_is_read_before_the_script():
    assert run_torch.split_nproc(["--nproc", "3", "a.py", "--nproc", "1"]) == (3, ["a.py", "--nproc", "1"])
    assert run_torch.split_nproc(["--nproc-per-node=2", "a.py"]) == (2, ["a.py"])
    with pytest.raises(ValueError, match="--nproc must be a positive number of processes, got '0'"):
        run_torch.split_nproc(["--nproc", "0", "a.py"])
