"""``trainkit.distributed`` (``torch.distributed``): process groups, collectives and data-parallel training over MPI.

A program written for ``torchrun --nproc_per_node=N`` runs unchanged with ``trainkit run-torch --nproc N SCRIPT``
(or ``mpiexec -n N trainkit run-torch SCRIPT``): ``init_process_group("gloo")`` (or ``"mpi"``, or ``"nccl"`` on a
GPU machine) joins the world the launcher started, and the collectives run over MPI through mpi4py. The Trainer's
``strategy="ddp"`` and ``DistributedDataParallel`` join that world themselves. Without a launcher the world is this
process alone, where every collective returns its input and mpi4py is never imported.

>>> import trainkit
>>> import trainkit.distributed as dist
>>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
>>> dist.get_rank(), dist.get_world_size()
(0, 1)
>>> t = trainkit.ones(2)
>>> dist.all_reduce(t, op=dist.ReduceOp.AVG); t
tensor([1., 1.])
>>> dist.destroy_process_group()
"""

from __future__ import annotations

from .collectives import (
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    gather,
    gather_object,
    monitored_barrier,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
)
from .comm import ReduceOp, World, joined, launched_size, world
from .ddp import DistributedDataParallel
from .exchange import all_to_all, all_to_all_single, irecv, isend, recv, scatter_object_list, send
from .process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    default_group,
    destroy_process_group,
    follow_torch_rules,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_backend_available,
    is_initialized,
    is_torchelastic_launched,
    nccl_usable,
    new_group,
)
from .reducer import GradientReducer, broadcast_tensors
from .sampler import DistributedSampler, ShardedBatchSampler, shard_bounds


def is_available() -> bool:
    """Whether mpi4py can be imported, which a world of more than one process needs (a world of one works
    without it).

    >>> isinstance(is_available(), bool)
    True
    """
    return is_mpi_available()


def is_mpi_available() -> bool:
    """Whether mpi4py can be imported: every backend runs over MPI.

    >>> isinstance(is_mpi_available(), bool)
    True
    """
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_gloo_available() -> bool:
    """Whether ``init_process_group("gloo")`` can run: it runs over MPI, as every backend does.

    >>> is_gloo_available() == is_mpi_available()
    True
    """
    return is_mpi_available()


def is_nccl_available() -> bool:
    """Whether ``init_process_group("nccl")`` can run: there must be a CUDA GPU (through CuPy).

    >>> isinstance(is_nccl_available(), bool)
    True
    """
    return nccl_usable()


__all__ = [
    "Backend",
    "DistributedDataParallel",
    "DistributedSampler",
    "GradientReducer",
    "GroupMember",
    "ProcessGroup",
    "ReduceOp",
    "ShardedBatchSampler",
    "Work",
    "World",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "broadcast_tensors",
    "default_group",
    "destroy_process_group",
    "follow_torch_rules",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_node_local_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "irecv",
    "is_available",
    "is_backend_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "is_torchelastic_launched",
    "isend",
    "joined",
    "launched_size",
    "monitored_barrier",
    "new_group",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "shard_bounds",
    "world",
]
