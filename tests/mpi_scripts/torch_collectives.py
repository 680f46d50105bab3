"""Every torch.distributed collective on 2 ranks, run by torch (torchrun) and by trainkit (trainkit run-torch), each
rank writing what it saw to OUT.rankR.json: tests/test_torch_distributed.py compares the two.

usage: torch_collectives.py OUT
"""

import json
import sys

import torch
import torch.distributed as dist

results = {}


def record(name, fn, *args):
    """The case's value, or the kind of error it raised (the same on every rank, so that none waits alone)."""
    try:
        value = fn(*args)
    except Exception as err:  # noqa: BLE001
        value = {"error": type(err).__name__, "message": str(err).splitlines()[0]}
    results[name] = value


def listed(value):
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).split(".")[-1], "values": value.float().tolist()}
    if isinstance(value, (list, tuple)):
        return [listed(v) for v in value]
    return value


dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()


def reduced(op, dtype):
    if dtype == torch.bool:
        t = torch.tensor([True, rank == 0, False])
    elif dtype.is_floating_point:
        t = torch.tensor([1.5, 2.0 + rank, -rank, 0.25 * (rank + 1)], dtype=dtype)
    else:
        t = torch.tensor([1, 2 + rank, 6 - rank, 12], dtype=dtype)
    assert dist.all_reduce(t, op=op) is None
    return listed(t)


for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR"):
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool):
        record(f"all_reduce {op} {str(dtype).split('.')[-1]}", reduced, getattr(dist.ReduceOp, op), dtype)
record("all_reduce default op", lambda: listed((lambda t: (dist.all_reduce(t), t)[1])(torch.ones(3) * (rank + 1))))
record("all_reduce 0-d", lambda: listed((lambda t: (dist.all_reduce(t), t)[1])(torch.tensor(2.0 + rank))))


def strided():
    base = torch.arange(6.0).reshape(2, 3) * (rank + 1)
    dist.all_reduce(base.t())  # a non-contiguous view: its base sees the result
    return listed(base)


record("all_reduce strided view", strided)


def asynchronous():
    t = torch.ones(2) * (rank + 1)
    work = dist.all_reduce(t, async_op=True)
    return [work.wait(), work.is_completed(), listed(t)]


record("all_reduce async", asynchronous)


def broadcast(src, dtype):
    t = (torch.arange(4) * (rank + 1)).to(dtype)
    dist.broadcast(t, src=src)
    return listed(t)


for src in (0, 1):
    for dtype in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
        record(f"broadcast src={src} {str(dtype).split('.')[-1]}", broadcast, src, dtype)


def all_gather(shape, dtype):
    out = [torch.zeros(shape, dtype=dtype) for _ in range(size)]
    dist.all_gather(out, (torch.ones(shape) * (rank + 1)).to(dtype))
    return listed(out)


record("all_gather", lambda: all_gather((2, 3), torch.float32))
record("all_gather int", lambda: all_gather((3,), torch.int64))
record("all_gather 0-d", lambda: all_gather((), torch.float64))


def gather_into():
    out = torch.zeros(4, 3)
    dist.all_gather_into_tensor(out, torch.arange(6.0).reshape(2, 3) + 10 * rank)
    return listed(out)


record("all_gather_into_tensor", gather_into)


def reduce(dst, op):
    t = torch.tensor([1.0, 2.0 + rank, -3.0 * rank])
    dist.reduce(t, dst=dst, op=op)
    return listed(t) if rank == dst else None


for dst in (0, 1):
    for op in ("SUM", "MAX", "AVG"):
        record(f"reduce dst={dst} {op}", reduce, dst, getattr(dist.ReduceOp, op))


def gather(dst):
    out = [torch.zeros(2) for _ in range(size)] if rank == dst else None
    dist.gather(torch.ones(2) * (rank + 5), out, dst=dst)
    return listed(out)


record("gather dst=0", lambda: gather(0))
record("gather dst=1", lambda: gather(1))


def scatter(src):
    out = torch.zeros(3, dtype=torch.int64)
    parts = [torch.arange(3) + 10 * r + 100 * src for r in range(size)] if rank == src else None
    dist.scatter(out, parts, src=src)
    return listed(out)


record("scatter src=0", lambda: scatter(0))
record("scatter src=1", lambda: scatter(1))


def reduce_scatter():
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.ones(2) * (rank + 1), torch.ones(2) * (rank + 10)])
    return listed(out)


def reduce_scatter_tensor():
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(4.0) * (rank + 1))
    return listed(out)


record("reduce_scatter", reduce_scatter)
record("reduce_scatter_tensor", reduce_scatter_tensor)


def objects():
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "name": f"r{rank}"})
    sent = [rank, f"from {rank}", {"k": [rank]}]
    dist.broadcast_object_list(sent, src=1)
    collected = [None] * size if rank == 0 else None
    dist.gather_object(("x", rank), collected, dst=0)
    return [gathered, sent, collected]


record("objects", objects)
record("barrier", lambda: [dist.barrier(), dist.barrier(async_op=True).wait()])
record(
    "queries",
    lambda: [
        dist.is_initialized(),
        dist.get_backend(),
        dist.get_world_size(dist.group.WORLD),
        dist.get_rank(dist.group.WORLD),
        dist.group.WORLD is not None,
        dist.new_group().size(),
        dist.new_group().rank(),
    ],
)


def point_to_point():
    peer = 1 - rank
    t = torch.zeros(3, dtype=torch.int64)
    if rank == 0:
        dist.send(torch.arange(3) + 7, dst=peer)
        sender = dist.recv(t)  # from any rank
    else:
        sender = dist.recv(t, src=peer)
        dist.send(t * 2, dst=peer)
    out = torch.zeros(2, dtype=torch.bfloat16)
    works = [dist.isend(torch.full((2,), rank + 0.5, dtype=torch.bfloat16), dst=peer), dist.irecv(out, src=peer)]
    return [sender, listed(t), [w.wait() for w in works], listed(out)]


def all_to_all_single(uneven):
    out = torch.zeros(3 if uneven else 4)
    if uneven:  # rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 2 to rank 0 and 1 to itself
        sent, got = ([1, 2], [1, 2]) if rank == 0 else ([2, 1], [2, 1])
        dist.all_to_all_single(out, torch.arange(3.0) + 10 * rank, got, sent)
    else:
        dist.all_to_all_single(out, torch.arange(4.0) + 10 * rank)
    return listed(out)


def all_to_all():
    out = [torch.zeros(2), torch.zeros(2)]
    dist.all_to_all(out, [torch.ones(2) * (10 * rank), torch.ones(2) * (10 * rank + 1)])
    return listed(out)


def scatter_objects():
    out = [None]
    dist.scatter_object_list(out, [{"a": 1}, {"b": 2}] if rank == 1 else None, src=1)
    return out


record("send recv isend irecv", point_to_point)
record("all_to_all_single", all_to_all_single, False)
record("all_to_all_single uneven", all_to_all_single, True)
record("all_to_all", all_to_all)
record("scatter_object_list", scatter_objects)
record("monitored_barrier", lambda: dist.monitored_barrier())
record(
    "ranks",
    lambda: [
        dist.get_process_group_ranks(dist.group.WORLD),
        dist.get_global_rank(dist.group.WORLD, 1),
        dist.get_group_rank(dist.group.WORLD, 1),
        dist.get_node_local_rank(),
        dist.is_backend_available("gloo"),
    ],
)
record("error send to self", lambda: dist.send(torch.ones(1), dst=rank))
# errors, raised alike on every rank
record("error not a tensor", lambda: dist.all_reduce([1.0]))
record("error all_gather length", lambda: dist.all_gather([torch.zeros(2)], torch.ones(2)))
record("error all_gather shape", lambda: dist.all_gather([torch.zeros(3), torch.zeros(3)], torch.ones(2)))
record("error double init", lambda: dist.init_process_group("gloo"))
dist.destroy_process_group()
record("after destroy", lambda: [dist.is_initialized(), dist.group.WORLD])
record("get_rank after destroy", lambda: dist.get_rank())
record("destroy twice", lambda: dist.destroy_process_group())

with open(f"{sys.argv[1]}.rank{rank}.json", "w") as f:
    json.dump(results, f, indent=1, sort_keys=True)
