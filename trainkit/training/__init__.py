"""What the Trainer's loop stands on: where a run folder keeps its files (``run_folder``), the checkpoint format,
the strategies that spread a step over devices and processes (``strategy``: one device, or DDP over MPI), and the
passes over a loader that call the Trainer's step methods (``loop``).

The modules are imported by name (``trainkit.training.strategy``); this package imports none of them itself, so
that the callbacks, which sit below the strategies, can reach the checkpoint format without pulling the loop in.
"""
