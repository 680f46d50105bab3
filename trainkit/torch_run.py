"""``python -m trainkit.torch_run SCRIPT [ARGS...]``: ``trainkit run-torch``, for when the command is not on the PATH.

Runs a PyTorch program unmodified, ``import torch`` giving trainkit (see ``trainkit.cli.run_torch``).

>>> from trainkit.torch_run import main
>>> main(["train.py", "--epochs", "2"])  # doctest: +SKIP
"""

from __future__ import annotations

import sys

from .cli.run_torch import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
