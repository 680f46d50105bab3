"""Data-parallel training over MPI, with torch.distributed's names for the basics.

Start N processes with ``mpiexec -n N trainkit train CONFIG.yaml`` (or ``mpiexec -n N python script.py`` with
``Trainer(..., strategy="ddp")``): every rank starts from rank 0's weights, trains on its share of each batch, and
averages gradients with Allreduce before each optimizer step. Without mpi4py or without a launcher, the world is
this process alone and every collective returns its input.

>>> import trainkit
>>> import trainkit.distributed as dist
>>> dist.get_rank(), dist.get_world_size()
(0, 1)
>>> t = trainkit.ones(2)
>>> dist.all_reduce(t); t
tensor([1., 1.])
"""

from __future__ import annotations

from ..autograd.tensor import Tensor
from .comm import ReduceOp, World, is_initialized, launched_size, world
from .ddp import DistributedDataParallel
from .reducer import GradientReducer, broadcast_tensors
from .sampler import ShardedBatchSampler, shard_bounds


def is_available() -> bool:
    """Whether mpi4py can be imported (a world of one works without it)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def init_process_group(backend: str = "mpi") -> World:
    """Join the launcher's world (done on first use anyway); only the ``"mpi"`` backend exists."""
    if backend != "mpi":
        raise ValueError(f"init_process_group: backend {backend!r} is not supported; use 'mpi'")
    return world()


def get_rank() -> int:
    """This process's rank, 0 to world size - 1."""
    return world().rank


def get_world_size() -> int:
    """How many processes the job has."""
    return world().size


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM) -> None:
    """Combine ``tensor`` over all ranks, in place (its version counter moves, as after any in-place write)."""
    data = tensor._data
    if not data.flags.c_contiguous:
        raise RuntimeError("all_reduce: the tensor must be contiguous; call .contiguous() first")
    world().allreduce(data, op)
    tensor._version_counter[0] += 1


def broadcast(tensor: Tensor, src: int = 0) -> None:
    """Overwrite ``tensor`` on every rank with rank ``src``'s, in place."""
    broadcast_tensors([tensor], src)


def barrier() -> None:
    """Wait until every rank gets here."""
    world().barrier()


__all__ = [
    "DistributedDataParallel",
    "GradientReducer",
    "ReduceOp",
    "ShardedBatchSampler",
    "World",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_tensors",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_available",
    "is_initialized",
    "launched_size",
    "shard_bounds",
    "world",
]
