"""A model whose forward raises on rank 1 (the launcher's PMI_RANK) in its third call, for tests/test_distributed.py."""

import os

from trainkit import nn


class FragileForward(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(1, 1))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if os.environ.get("PMI_RANK") == "1" and self.calls == 3:
            raise ValueError("broken batch on purpose")
        return super().forward(x)
