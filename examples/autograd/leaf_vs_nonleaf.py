"""Leaves and non-leaves: only leaves that require grad get a .grad; an op result has a grad_fn instead.

Run: python examples/autograd/leaf_vs_nonleaf.py [FOLDER]   (the page goes to FOLDER, a temp folder by default)
In the page, the blue boxes are the AccumulateGrad nodes of the leaves: click one to see is_leaf=True and its .grad.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
a = torch.tensor([1.0, 2.0], requires_grad=True)  # a leaf that requires grad
b = torch.tensor([3.0, 4.0])  # a leaf that does not: no node in the graph, a None in next_functions
c = a * b  # not a leaf: c.grad_fn is MulBackward0
loss = c.sum()
with torch.autograd.explore.record() as rec:
    loss.backward()
print("a.grad =", a.grad, " b.grad =", b.grad, " c.is_leaf =", c.is_leaf)
path = folder / "leaf_vs_nonleaf.html"
torch.autograd.explore(loss, {"a": a, "b": b}, path=path, trace=rec, title="leaf vs non-leaf")
print(f"wrote {path}")
