"""detach(): a leaf that shares storage (and _version) with the original tensor, and stops the gradient.

Run: python examples/autograd/detach.py [FOLDER]
In the page, click MulBackward0: it saved the detached copy (w's gradient needs it), which shares storage with w.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
d = w.detach()  # same numbers, no grad_fn, requires_grad=False: the gradient does not flow through it
loss = (w * d).sum()  # d/dw = d, not 2 * w: d counts as a constant
with torch.autograd.explore.record() as rec:
    loss.backward()
print("w.grad =", w.grad, " d.requires_grad =", d.requires_grad, " same version counter:", d._version == w._version)
path = folder / "detach.html"
torch.autograd.explore(loss, {"w": w, "d": d}, path=path, trace=rec, title="detach shares storage")
print(f"wrote {path}")
