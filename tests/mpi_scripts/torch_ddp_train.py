"""A typical torchrun data-parallel training program, run unchanged by torch (torchrun --nproc_per_node=N) and by
trainkit (trainkit run-torch --nproc N, mpiexec -n N trainkit run-torch): tests/test_torch_distributed.py.

usage: torch_ddp_train.py OUT  (rank 0 writes OUT.json with the losses and OUT.pt with the weights)
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

GLOBAL_BATCH = 16


def main():
    out = sys.argv[1]
    assert dist.is_available() and not dist.is_initialized()
    try:
        dist.get_rank()
    except ValueError as err:  # torch's rule, whichever way the ranks were started
        assert "Default process group has not been initialized" in str(err)
    else:
        raise AssertionError("get_rank() before init_process_group() must raise")
    dist.init_process_group(backend="gloo")
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    rank, world_size = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world_size == int(os.environ["WORLD_SIZE"])
    assert int(os.environ["LOCAL_RANK"]) == rank and int(os.environ["LOCAL_WORLD_SIZE"]) == world_size
    assert os.environ["MASTER_ADDR"] and os.environ["MASTER_PORT"].isdigit()

    torch.manual_seed(0)
    x = torch.randn(100, 4)
    y = torch.tanh(x @ torch.tensor([[0.5], [-1.0], [0.25], [2.0]])) + 0.1 * torch.randn(100, 1)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=GLOBAL_BATCH // world_size, sampler=sampler, drop_last=True)

    torch.manual_seed(1 + rank)  # unlike weights on each rank: DDP must start every rank from rank 0's
    model = DDP(nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    losses = []
    for epoch in range(5):
        sampler.set_epoch(epoch)
        totals = torch.zeros(2, dtype=torch.float64)
        for xb, yb in loader:
            optimizer.zero_grad()
            half = len(xb) // 2
            with model.no_sync():  # gradient accumulation: the first half only accumulates locally
                (F.mse_loss(model(xb[:half]), yb[:half]) / 2).backward()
            loss = F.mse_loss(model(xb[half:]), yb[half:]) / 2
            loss.backward()
            optimizer.step()
            totals += torch.tensor([F.mse_loss(model(xb), yb).item() * len(xb), len(xb)], dtype=torch.float64)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        losses.append((totals[0] / totals[1]).item())
        if rank == 0:
            print(f"epoch {epoch} loss {losses[-1]:.6f}")

    dist.barrier()
    if rank == 0:
        torch.save(model.module.state_dict(), out + ".pt")
        with open(out + ".json", "w") as f:
            json.dump({"losses": losses, "keys": list(model.state_dict()), "world_size": world_size}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
