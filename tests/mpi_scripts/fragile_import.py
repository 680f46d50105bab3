"""A model file that cannot be imported on rank 1 (the launcher's PMI_RANK), for tests/test_distributed.py: its
class_path fails to resolve there only, a config error on one rank."""

import os

from trainkit import nn

if os.environ.get("PMI_RANK") == "1":
    import a_module_only_rank_0_has  # noqa: F401


class Net(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(1, 1))
