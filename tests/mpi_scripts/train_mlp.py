"""Train a small MLP a few steps and save its parameters: run by tests/test_distributed.py, alone or under mpiexec.

usage: python train_mlp.py MODE SAMPLES OUT.npz   (MODE: ddp, wrapped, accumulate or single)
"""

import sys

import numpy as np

import trainkit
from trainkit import Trainer, nn, optim

mode, samples, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
trainkit.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
x = trainkit.randn(samples, 4)
y = trainkit.randint(0, 3, (samples,))
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
if mode == "accumulate":  # each global batch of 16 as two micro-batches of 8: the sums a 2-rank run does
    trainer = Trainer(
        model,
        optimizer,
        "cross_entropy",
        metrics=["accuracy"],
        seed=0,
        verbose=False,
        strategy="single_device",
        accumulate_steps=2,
    )
    history = trainer.fit(x, y, epochs=2, batch_size=8)
elif mode == "wrapped":  # averaged by the DistributedDataParallel wrapper's hooks instead of the Trainer
    trainer = Trainer(
        nn.parallel.DistributedDataParallel(model),
        optimizer,
        "cross_entropy",
        metrics=["accuracy"],
        seed=0,
        verbose=False,
        strategy="ddp",
    )
    history = trainer.fit(x, y, epochs=2, batch_size=16)
else:
    trainer = Trainer(
        model,
        optimizer,
        "cross_entropy",
        metrics=["accuracy"],
        seed=0,
        verbose=False,
        strategy="ddp" if mode == "ddp" else "single_device",
    )
    history = trainer.fit(x, y, epochs=2, batch_size=16)
if trainer.rank == 0:
    np.savez(
        out,
        *[p.detach().numpy() for p in model.parameters()],
        loss=np.array(history.history["loss"]),
        accuracy=np.array(history.history["accuracy"]),
        steps=np.array(trainer.global_step),
    )
