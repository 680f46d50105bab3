"""torch.distributed's collectives on Tensors: ``all_reduce``, ``broadcast``, ``all_gather``, ``reduce``, ``gather``,
``scatter``, ``reduce_scatter`` and their object and single-tensor forms, over the default group's MPI world.

Each writes its result into the tensors it is given, in place (their version counters move, as after any in-place
write), and returns None, or with ``async_op=True`` a ``Work`` whose ``wait()`` returns True: the collective has
already completed when the call returns. Copies go through MPI as bytes, so every dtype travels exactly;
reductions run in the tensor's dtype (float16 and bfloat16 in float32, rounded once at the end).
"""

from __future__ import annotations

import numpy as np

from ..autograd.backend import SCALAR_NAMES, xp_of
from ..autograd.tensor import Tensor
from .comm import ReduceOp
from .process_group import ProcessGroup, collective_group

HALF_TYPES = ("float16", "bfloat16")


class Work:
    """What a collective with ``async_op=True`` returns (and ``isend``/``irecv``). A collective has already
    completed at the call; a point-to-point transfer completes at ``wait()``.

    >>> w = Work([]); w.wait(), w.is_completed(), w.is_success()
    (True, True, True)
    """

    def __init__(self, tensors: list[Tensor], request=None, then=None):
        self.tensors = tensors
        self.request = request  # an MPI request still running, and what to do once it is done
        self.then = then

    def done(self) -> None:
        self.request = None
        if self.then is not None:
            self.then()
            self.then = None

    def wait(self, timeout=None) -> bool:
        """Block until the transfer is done: True."""
        if self.request is not None:
            self.request.Wait()
            self.done()
        return True

    def is_completed(self) -> bool:
        """Whether the transfer is done (without waiting)."""
        if self.request is not None and self.request.Test():
            self.done()
        return self.request is None

    def is_success(self) -> bool:
        """Whether it succeeded (a failure raises at the call or at ``wait``)."""
        return self.is_completed()

    def synchronize(self) -> None:
        """Wait for the transfer (as ``wait``)."""
        self.wait()

    def exception(self) -> None:
        """The error of a failed transfer: None, since failures raise."""
        return None

    def result(self) -> list[Tensor]:
        """The tensors it wrote."""
        return list(self.tensors)


def finish(tensors: list[Tensor], async_op: bool) -> Work | None:
    """What a collective returns: None, or with ``async_op`` a completed ``Work``.

    >>> finish([], False) is None, finish([], True).wait()
    (True, True)
    """
    return Work(tensors) if async_op else None


def check_tensor(tensor, name: str = "tensor") -> Tensor:
    """``tensor``, or torch's TypeError when it is not a Tensor.

    >>> check_tensor([1.0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: Invalid function argument. Expected parameter `tensor` of type torch.Tensor...
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type torch.Tensor\n"
            f"             but got {type(tensor)} instead."
        )
    return tensor


def _check_op(op) -> ReduceOp:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a trainkit.distributed.ReduceOp (ReduceOp.SUM, ...), got {op!r}")
    return op


def check_rank(rank: int, size: int, what: str) -> int:
    """``rank`` when it names a rank of a group of ``size``, else torch's RuntimeError.

    >>> check_rank(1, 2, "broadcast")
    1
    """
    if not isinstance(rank, int) or not 0 <= rank < size:
        raise RuntimeError(f"{what}: invalid root rank: {rank} (the group has ranks 0 to {size - 1})")
    return rank


def host(tensor: Tensor) -> np.ndarray:
    """The tensor's values as a contiguous host array (a copy when it is a view, strided or on a GPU).

    >>> import trainkit
    >>> host(trainkit.ones(2, 3).t()).shape
    (3, 2)
    """
    data = tensor._data
    if xp_of(data) is not np:
        return data.get()
    return np.ascontiguousarray(data)


def store(tensor: Tensor, values: np.ndarray) -> None:
    """Write ``values`` into ``tensor`` in place, in its dtype, and count the write.

    >>> import trainkit
    >>> t = trainkit.zeros(2)
    >>> store(t, np.array([1, 2])); t
    tensor([1., 2.])
    """
    data = tensor._data
    values = values.reshape(data.shape)
    data[...] = xp_of(data).asarray(values).astype(data.dtype, copy=False)
    tensor._version_counter[0] += 1


def as_bytes(array: np.ndarray) -> np.ndarray:
    """A flat byte view: copies through MPI move bytes, so any dtype (bool, bfloat16) travels exactly.

    >>> as_bytes(np.ones(2, np.float32)).shape
    (8,)
    """
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _check_reduction(dtype, op: ReduceOp) -> None:
    """torch's refusals: AVG needs a floating dtype, the bitwise ops an integral one."""
    kind = np.dtype(dtype).name
    floating = kind in HALF_TYPES or np.dtype(dtype).kind in "fc"
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and floating:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op is ReduceOp.AVG and not floating:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {SCALAR_NAMES.get(kind, kind)}")


def _native(data) -> bool:
    """Whether MPI (or NCCL) can take the array as it is: contiguous, of a dtype it knows (not bool or 16-bit
    floats, which go as bytes or through float32)."""
    return bool(data.flags.c_contiguous) and data.dtype.kind in "iuf" and data.dtype.name not in HALF_TYPES


def _reduce_into(array: np.ndarray, op: ReduceOp, pg: ProcessGroup, run) -> np.ndarray:
    """Run the reduction ``run(values, mpi_op)`` on a copy of ``array`` MPI can reduce; AVG is the sum over the
    world size. bool goes as uint8 (SUM and MAX are or, PRODUCT and MIN are and), float16 and bfloat16 as float32.
    """
    _check_reduction(array.dtype, op)
    mpi_op = ReduceOp.SUM if op is ReduceOp.AVG else op
    if array.dtype.name == "bool":
        values = array.astype(np.uint8)
        mpi_op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(mpi_op, mpi_op)
    elif array.dtype.name in HALF_TYPES:
        values = array.astype(np.float32)
    else:
        values = np.array(array, copy=True, order="C")
    result = run(values, mpi_op)
    if op is ReduceOp.AVG:
        result = result / result.dtype.type(pg.size())
    return result


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op=False):
    """Combine ``tensor`` over all ranks, in place: ``SUM``, ``PRODUCT``, ``MIN``, ``MAX``, ``AVG`` (floating
    dtypes), ``BAND``, ``BOR``, ``BXOR`` (integral dtypes).

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> t = trainkit.ones(2)
    >>> all_reduce(t); t
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    _check_op(op)
    pg = collective_group(group)
    data = tensor._data
    if _native(data):  # in place where it is (NCCL for a CuPy array when CuPy has it)
        _check_reduction(data.dtype, op)
        pg.world.allreduce(data, ReduceOp.SUM if op is ReduceOp.AVG else op)
        if op is ReduceOp.AVG:
            data /= data.dtype.type(pg.size())
        tensor._version_counter[0] += 1
    else:
        store(tensor, _reduce_into(host(tensor), op, pg, lambda values, mpi_op: pg.world.allreduce(values, mpi_op)))
    return finish([tensor], async_op)


def broadcast(tensor: Tensor, src: int = 0, group: ProcessGroup | None = None, async_op=False, group_src=None):
    """Overwrite ``tensor`` on every rank with rank ``src``'s, in place.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> t = trainkit.arange(3.0)
    >>> broadcast(t, src=0); t
    tensor([0., 1., 2.])
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    pg = collective_group(group)
    src = check_rank(src if group_src is None else group_src, pg.size(), "broadcast")
    if _native(tensor._data) or tensor._data.dtype.name == "bool":  # in place where it is
        pg.world.broadcast(tensor._data, src)
        tensor._version_counter[0] += 1
    else:
        array = host(tensor)
        values = as_bytes(array)
        pg.world.broadcast(values, src)
        store(tensor, values.view(array.dtype))
    return finish([tensor], async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor of the same shape and dtype per rank).

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> out = [trainkit.zeros(2)]
    >>> all_gather(out, trainkit.ones(2)); out
    [tensor([1., 1.])]
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    pg = collective_group(group)
    _check_list(tensor_list, tensor, pg.size(), "all_gather", "output")
    values = host(tensor)
    gathered = pg.world.allgather(as_bytes(values), np.empty(pg.size() * values.nbytes, np.uint8))
    for r, out in enumerate(tensor_list):
        store(out, gathered[r * values.nbytes : (r + 1) * values.nbytes].view(values.dtype))
    return finish(list(tensor_list), async_op)


def _check_list(tensors, like: Tensor, size: int, what: str, role: str) -> None:
    """torch's errors for a list that must hold one tensor like ``like`` per rank."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != size:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise RuntimeError(f"{what}: invalid {role} tensor list at index 0 (expected length {size}, got {got})")
    for i, t in enumerate(tensors):
        check_tensor(t, f"{role}_tensor_list")
        if tuple(t.shape) != tuple(like.shape):
            raise RuntimeError(f"{what}: invalid tensor size at index {i} (expected {_sizes(like)}, got {_sizes(t)})")
        if t.dtype != like.dtype:
            raise RuntimeError(
                f"{what}: invalid tensor type at index {i} (expected {_dtype_name(like)}, got {_dtype_name(t)})"
            )


def _sizes(tensor: Tensor) -> str:
    """A shape as torch's messages write it: (2, 3), (2)."""
    return f"({', '.join(map(str, tensor.shape))})"


def _dtype_name(tensor: Tensor) -> str:
    kind = tensor._data.dtype.name
    return SCALAR_NAMES.get(kind, kind)


def _check_stacked(whole: Tensor, part: Tensor, size: int, what: str, role: str) -> None:
    """``whole`` holds ``size`` parts like ``part``: concatenated along the first axis or stacked on a new one."""
    check_tensor(whole, f"{role}_tensor")
    concatenated = part.dim() > 0 and tuple(whole.shape) == (size * part.shape[0], *part.shape[1:])
    if not (concatenated or tuple(whole.shape) == (size, *part.shape)):
        raise RuntimeError(
            f"{what}: {role} tensor size must be equal to world_size times input tensor size "
            f"(world_size {size}, input {tuple(part.shape)}, {role} {tuple(whole.shape)})"
        )
    if whole.dtype != part.dtype:
        raise RuntimeError(f"{what}: invalid tensor type (expected {_dtype_name(part)}, got {_dtype_name(whole)})")


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` side by side in ``output_tensor``: concatenated along the first axis
    (world size times as long) or stacked on a new first axis of length world size.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> out = trainkit.zeros(2)
    >>> all_gather_into_tensor(out, trainkit.tensor([1.0, 2.0])); out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    check_tensor(input_tensor, "input_tensor")
    pg = collective_group(group)
    _check_stacked(output_tensor, input_tensor, pg.size(), "all_gather_into_tensor", "output")
    values = host(input_tensor)
    gathered = pg.world.allgather(as_bytes(values), np.empty(pg.size() * values.nbytes, np.uint8))
    store(output_tensor, gathered.view(values.dtype))
    return finish([output_tensor], async_op)


def reduce(
    tensor: Tensor, dst: int | None = None, op: ReduceOp = ReduceOp.SUM, group=None, async_op=False, group_dst=None
):
    """Combine ``tensor`` over all ranks into rank ``dst``'s ``tensor``; the others' are left as they were.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> t = trainkit.ones(2)
    >>> reduce(t, dst=0); t
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    _check_op(op)
    pg = collective_group(group)
    dst = check_rank(root(dst, group_dst, "dst"), pg.size(), "reduce")
    values = host(tensor)
    result = _reduce_into(values, op, pg, lambda send, mpi_op: pg.world.reduce(send, np.empty_like(send), mpi_op, dst))
    if pg.rank() == dst:
        store(tensor, result)
    return finish([tensor], async_op)


def root(rank: int | None, group_rank: int | None, name: str) -> int:
    """The root a rooted collective names (``dst``/``src`` or ``group_dst``/``group_src``; 0 when neither).

    >>> root(None, 1, "dst"), root(None, None, "src")
    (1, 0)
    """
    if rank is not None and group_rank is not None:
        raise ValueError(f"Cannot specify both {name} and group_{name}")
    return rank if rank is not None else group_rank if group_rank is not None else 0


def gather(
    tensor: Tensor,
    gather_list: list[Tensor] | None = None,
    dst: int | None = None,
    group=None,
    async_op=False,
    group_dst=None,
):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (which alone passes a list).

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> out = [trainkit.zeros(2)]
    >>> gather(trainkit.ones(2), out, dst=0); out
    [tensor([1., 1.])]
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    pg = collective_group(group)
    dst = check_rank(root(dst, group_dst, "dst"), pg.size(), "gather")
    if pg.rank() == dst:
        if not gather_list:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        _check_list(gather_list, tensor, pg.size(), "gather", "output")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    values = host(tensor)
    received = np.empty(pg.size() * values.nbytes if pg.rank() == dst else 0, np.uint8)
    pg.world.gather(as_bytes(values), received if pg.rank() == dst else None, dst)
    if pg.rank() == dst:
        for r, out in enumerate(gather_list):
            store(out, received[r * values.nbytes : (r + 1) * values.nbytes].view(values.dtype))
    return finish([tensor], async_op)


def scatter(
    tensor: Tensor,
    scatter_list: list[Tensor] | None = None,
    src: int | None = None,
    group=None,
    async_op=False,
    group_src=None,
):
    """Rank ``src``'s ``scatter_list[r]`` into rank ``r``'s ``tensor`` (rank ``src`` alone passes a list).

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> t = trainkit.zeros(2)
    >>> scatter(t, [trainkit.ones(2)], src=0); t
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    check_tensor(tensor)
    pg = collective_group(group)
    src = check_rank(root(src, group_src, "src"), pg.size(), "scatter")
    if pg.rank() == src:
        if not scatter_list:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
        _check_list(scatter_list, tensor, pg.size(), "scatter", "input")
        send = np.concatenate([as_bytes(host(t)) for t in scatter_list])
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    else:
        send = None
    values = host(tensor)
    received = np.empty(values.nbytes, np.uint8)
    pg.world.scatter(send, received, src)
    store(tensor, received.view(values.dtype))
    return finish([tensor], async_op)


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: ReduceOp = ReduceOp.SUM, group=None, async_op=False):
    """``input_list[r]`` combined over all ranks, into rank ``r``'s ``output``.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> out = trainkit.zeros(2)
    >>> reduce_scatter(out, [trainkit.ones(2)]); out
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    check_tensor(output, "output")
    _check_op(op)
    pg = collective_group(group)
    _check_list(input_list, output, pg.size(), "reduce_scatter", "input")
    send = np.concatenate([host(t).reshape(-1) for t in input_list])
    result = _reduce_into(
        send, op, pg, lambda values, mpi_op: pg.world.reduce_scatter(values, values[: output.numel()].copy(), mpi_op)
    )
    store(output, result)
    return finish([output], async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op=False):
    """``input`` cut into world-size parts along its first axis (or stacked on a new one), combined over all
    ranks; rank ``r`` gets part ``r`` in ``output``.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> import trainkit
    >>> out = trainkit.zeros(2)
    >>> reduce_scatter_tensor(out, trainkit.ones(2)); out
    tensor([1., 1.])
    >>> dist.destroy_process_group()
    """
    check_tensor(output, "output")
    _check_op(op)
    pg = collective_group(group)
    _check_stacked(input, output, pg.size(), "reduce_scatter_tensor", "input")
    send = host(input).reshape(-1)
    result = _reduce_into(
        send, op, pg, lambda values, mpi_op: pg.world.reduce_scatter(values, values[: output.numel()].copy(), mpi_op)
    )
    store(output, result)
    return finish([output], async_op)


def barrier(group: ProcessGroup | None = None, async_op=False, device_ids=None):
    """Wait until every rank gets here.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> barrier()
    >>> dist.destroy_process_group()
    """
    collective_group(group).world.barrier()
    return finish([], async_op)


def monitored_barrier(group: ProcessGroup | None = None, timeout=None, wait_all_ranks: bool = False) -> None:
    """A barrier that gives up after ``timeout`` (a ``timedelta``; the group's timeout when None), ending the job
    with a message naming the wait instead of hanging.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> dist.monitored_barrier()
    >>> dist.destroy_process_group()
    """
    the_world = collective_group(group).world
    before = the_world.timeout
    if timeout is not None:
        the_world.timeout = timeout.total_seconds()
    try:
        the_world.barrier()
    finally:
        the_world.timeout = before


def all_gather_object(object_list: list, obj, group: ProcessGroup | None = None) -> None:
    """Every rank's ``obj`` (pickled: trusted values only) into ``object_list``, one entry per rank.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> out = [None]
    >>> all_gather_object(out, {"loss": 0.5}); out
    [{'loss': 0.5}]
    >>> dist.destroy_process_group()
    """
    pg = collective_group(group)
    gathered = pg.world.comm.allgather(obj) if pg.world.comm is not None else [obj]
    object_list[: len(gathered)] = gathered


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None, group_src=None):
    """Rank ``src``'s ``object_list`` entries (pickled: trusted values only) into every rank's, in place.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> objects = ["config", 3]
    >>> broadcast_object_list(objects, src=0); objects
    ['config', 3]
    >>> dist.destroy_process_group()
    """
    pg = collective_group(group)
    src = check_rank(root(src, group_src, "src"), pg.size(), "broadcast_object_list")
    object_list[:] = pg.world.broadcast_object(list(object_list), src)


def gather_object(obj, object_gather_list: list | None = None, dst: int | None = None, group=None, group_dst=None):
    """Every rank's ``obj`` (pickled: trusted values only) into ``object_gather_list`` on rank ``dst``.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> out = [None]
    >>> gather_object("x", out, dst=0); out
    ['x']
    >>> dist.destroy_process_group()
    """
    pg = collective_group(group)
    dst = check_rank(root(dst, group_dst, "dst"), pg.size(), "gather_object")
    gathered = pg.world.gather_object(obj, dst)
    if pg.rank() == dst:
        object_gather_list[: len(gathered)] = gathered
