"""Data-parallel corner cases, each a short run that saves what the test compares (tests/test_distributed.py).

usage: python edge_cases.py CASE STRATEGY OUT.npz
  empty:   10 samples from a plain Dataset in batches of 4, so that a 3-rank run has an empty share
  wrapped: the same with the model in DistributedDataParallel
  unused:  a parameter that takes no part in the loss, under weight decay and momentum
  bn:      BatchNorm running statistics, saved from every rank
  fail_eval: rank 1 fails inside evaluate(), outside fit()
"""

import sys

import numpy as np

import trainkit
import trainkit.distributed as dist
from trainkit import Trainer, nn, optim
from trainkit.data import Dataset

case, strategy, out = sys.argv[1], sys.argv[2], sys.argv[3]


class Pairs(Dataset):
    """Samples as plain lists: collated by default_collate, not cut from tensors."""

    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3)).astype(np.float32)
        self.y = rng.standard_normal((n, 1)).astype(np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.unused = nn.Linear(3, 1), nn.Linear(3, 1)

    def forward(self, x):
        return self.used(x)


trainkit.manual_seed(0)
if case == "bn":
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
elif case == "unused":
    model = WithUnused()
else:
    model = nn.Linear(3, 1)
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
trainer = Trainer(
    nn.parallel.DistributedDataParallel(model) if case == "wrapped" else model,
    optimizer,
    "mse",
    seed=0,
    verbose=False,
    strategy=strategy,
)
data = Pairs(12 if case == "bn" else 10)  # BatchNorm needs two samples a share
if case == "fail_eval":
    trainer.fit(data, epochs=1, batch_size=4)
    if dist.get_rank() == 1:
        raise ValueError("evaluation broke on purpose")
    trainer.evaluate(data, batch_size=4)
    raise SystemExit(0)
history = trainer.fit(data, val_data=data, epochs=3, batch_size=4)
states = {name: value.numpy() for name, value in model.state_dict().items()}
if case == "bn":
    everyone = dist.world().gather_object(states["1.running_mean"])
    if trainer.rank == 0:
        states["ranks_running_mean"] = np.stack(everyone)
if trainer.rank == 0:
    np.savez(out, loss=np.array(history.history["loss"]), val_loss=np.array(history.history["val_loss"]), **states)
