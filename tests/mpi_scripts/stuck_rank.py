"""Rank 1 stops answering (it sleeps) while rank 0 waits in an allreduce with a timeout, for tests/test_distributed.py:
the job must end within seconds with a message, not hang."""

import time

import numpy as np

from trainkit.distributed import world

group = world()
group.timeout = 2.0
if group.rank == 1:
    time.sleep(60)
group.allreduce(np.ones(3))
print("the allreduce completed")
