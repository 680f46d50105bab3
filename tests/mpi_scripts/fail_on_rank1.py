"""A model whose forward raises on rank 1 in its third batch: the job must end, not hang (tests/test_distributed.py)."""

import trainkit
import trainkit.distributed as dist
from trainkit import Trainer, nn


class Fragile(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if dist.get_rank() == 1 and self.calls == 3:
            raise ValueError("broken batch on purpose")
        return self.layer(x)


trainkit.manual_seed(0)
Trainer(Fragile(), loss="mse", verbose=False, strategy="ddp").fit(
    trainkit.randn(64, 2), trainkit.randn(64, 1), epochs=3, batch_size=8
)
