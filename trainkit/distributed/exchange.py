"""torch.distributed's transfers between given ranks: ``send``, ``recv``, ``isend``, ``irecv``, ``all_to_all``,
``all_to_all_single`` and ``scatter_object_list``, over the default group's MPI world.

Tensors travel as bytes, so every dtype arrives exactly; a received tensor is written in place.
"""

from __future__ import annotations

import numpy as np

from ..autograd.tensor import Tensor
from .collectives import Work, as_bytes, check_rank, check_tensor, finish, host, root, store
from .process_group import ProcessGroup, collective_group


def peer(rank: int, pg: ProcessGroup, what: str) -> int:
    """torch's checks of the other rank of a transfer."""
    if rank == pg.rank():
        raise ValueError(f"Invalid {what} rank: {what} rank should not be the same as the rank of the current process.")
    return check_rank(rank, pg.size(), what)


def send(tensor: Tensor, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0, group_dst=None):
    """Send ``tensor`` to rank ``dst``, which receives it with ``recv``; blocks until it has gone.

    >>> send(trainkit.ones(2), dst=1)  # doctest: +SKIP
    """
    check_tensor(tensor)
    pg = collective_group(group)
    pg.world.send(as_bytes(host(tensor)), peer(root(dst, group_dst, "dst"), pg, "destination"), tag)


def recv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0, group_src=None):
    """Receive into ``tensor`` what rank ``src`` (any rank when None) sent; the sender's rank.

    >>> recv(trainkit.zeros(2), src=0)  # doctest: +SKIP
    0
    """
    check_tensor(tensor)
    pg = collective_group(group)
    src = src if src is not None else group_src
    if src is not None:
        peer(src, pg, "source")
    values = host(tensor)
    received = np.empty(values.nbytes, np.uint8)
    sender = pg.world.recv(received, src, tag)
    store(tensor, received.view(values.dtype))
    return sender


def isend(tensor: Tensor, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0, group_dst=None):
    """Start sending ``tensor`` to rank ``dst``; ``wait()`` on the ``Work`` it returns before changing ``tensor``.

    >>> isend(trainkit.ones(2), dst=1).wait()  # doctest: +SKIP
    True
    """
    check_tensor(tensor)
    pg = collective_group(group)
    values = as_bytes(host(tensor))
    return Work([tensor], pg.world.isend(values, peer(root(dst, group_dst, "dst"), pg, "destination"), tag))


def irecv(tensor: Tensor, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0, group_src=None):
    """Start receiving into ``tensor`` from rank ``src``; it holds the values once ``wait()`` returns.

    >>> irecv(trainkit.zeros(2), src=0).wait()  # doctest: +SKIP
    True
    """
    check_tensor(tensor)
    pg = collective_group(group)
    src = src if src is not None else group_src
    if src is not None:
        peer(src, pg, "source")
    dtype = host(tensor).dtype
    received = np.empty(tensor.numel() * dtype.itemsize, np.uint8)
    return Work([tensor], pg.world.irecv(received, src, tag), lambda: store(tensor, received.view(dtype)))


def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: ProcessGroup | None = None,
    async_op: bool = False,
):
    """``input`` cut along its first axis (in equal parts, or by ``input_split_sizes``), part r to rank r; the
    parts this rank gets, in rank order, into ``output`` (cut by ``output_split_sizes``).

    >>> import trainkit
    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> out = trainkit.zeros(2)
    >>> dist.all_to_all_single(out, trainkit.tensor([1.0, 2.0])); out
    tensor([1., 2.])
    >>> dist.destroy_process_group()
    """
    check_tensor(output, "output")
    check_tensor(input, "input")
    pg = collective_group(group)
    size = pg.size()
    values = host(input)
    row = values.nbytes // max(len(input), 1) if input.dim() else values.nbytes
    out_row = host(output).nbytes // max(len(output), 1) if output.dim() else host(output).nbytes
    send_counts = split_counts(input_split_sizes, len(input) if input.dim() else 1, size, "input")
    recv_counts = split_counts(output_split_sizes, len(output) if output.dim() else 1, size, "output")
    received = np.empty(sum(recv_counts) * out_row, np.uint8)
    pg.world.alltoallv(as_bytes(values), [c * row for c in send_counts], received, [c * out_row for c in recv_counts])
    store(output, received.view(host(output).dtype))
    return finish([output], async_op)


def split_counts(sizes: list[int] | None, rows: int, world_size: int, role: str) -> list[int]:
    """How many rows go to (or come from) each rank: equal parts, or the given sizes."""
    if sizes is None or len(sizes) == 0:
        if rows % world_size:
            raise RuntimeError(f"all_to_all_single: {role} tensor's first dimension {rows} must divide by {world_size}")
        return [rows // world_size] * world_size
    if len(sizes) != world_size or sum(sizes) != rows:
        raise RuntimeError(
            f"all_to_all_single: {role}_split_sizes {list(sizes)} must have {world_size} entries summing to {rows}"
        )
    return [int(n) for n in sizes]


def all_to_all(output_tensor_list: list[Tensor], input_tensor_list: list[Tensor], group=None, async_op=False):
    """``input_tensor_list[r]`` to rank r; what rank r sent this rank into ``output_tensor_list[r]``.

    >>> import trainkit
    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> out = [trainkit.zeros(2)]
    >>> dist.all_to_all(out, [trainkit.ones(2)]); out
    [tensor([1., 1.])]
    >>> dist.destroy_process_group()
    """
    pg = collective_group(group)
    for role, tensors in (("output", output_tensor_list), ("input", input_tensor_list)):
        if len(tensors) != pg.size():
            raise RuntimeError(f"all_to_all: {role}_tensor_list must hold {pg.size()} tensors, got {len(tensors)}")
        for t in tensors:
            check_tensor(t, f"{role}_tensor_list")
    send = np.concatenate([as_bytes(host(t)) for t in input_tensor_list])
    send_counts = [host(t).nbytes for t in input_tensor_list]
    recv_counts = [host(t).nbytes for t in output_tensor_list]
    received = np.empty(sum(recv_counts), np.uint8)
    pg.world.alltoallv(send, send_counts, received, recv_counts)
    offset = 0
    for t, n in zip(output_tensor_list, recv_counts):
        store(t, received[offset : offset + n].view(host(t).dtype))
        offset += n
    return finish(list(output_tensor_list), async_op)


def scatter_object_list(
    scatter_object_output_list: list,
    scatter_object_input_list: list | None = None,
    src: int | None = None,
    group=None,
    group_src=None,
) -> None:
    """Rank ``src``'s ``scatter_object_input_list[r]`` (pickled: trusted values only) into rank r's
    ``scatter_object_output_list[0]``.

    >>> import trainkit.distributed as dist
    >>> dist.init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> out = [None]
    >>> dist.scatter_object_list(out, [{"part": 0}], src=0); out
    [{'part': 0}]
    >>> dist.destroy_process_group()
    """
    pg = collective_group(group)
    src = check_rank(root(src, group_src, "src"), pg.size(), "scatter_object_list")
    if pg.world.comm is None:
        scatter_object_output_list[0] = scatter_object_input_list[0]
        return
    scatter_object_output_list[0] = pg.world.comm.scatter(scatter_object_input_list if pg.rank() == src else None, src)
