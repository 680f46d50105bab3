"""A model that cannot be built on rank 1 (the launcher's PMI_RANK), for tests/test_distributed.py."""

import os

from trainkit import nn


class FragileNet(nn.Sequential):
    def __init__(self):
        if os.environ.get("PMI_RANK") == "1":
            raise ValueError("cannot build on rank 1")
        super().__init__(nn.Linear(1, 1))
