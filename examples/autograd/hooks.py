"""Tensor hooks: see (or change) a gradient as it passes, without keeping it.

Run: python examples/autograd/hooks.py [FOLDER]
In the page, the node marked H carries the hook; the totals show that a hook keeps 0 bytes, unlike retain_grad.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
x = torch.randn(100, 100, requires_grad=True)
h = x.tanh()
seen = []
h.register_hook(lambda grad: seen.append(float(grad.norm())))  # looks at the gradient, keeps a number only
loss = (h * h).sum()
with torch.autograd.explore.record() as rec:
    loss.backward()
print(f"the hook saw a gradient of norm {seen[0]:.3f}; h.retains_grad = {h.retains_grad}")
path = folder / "hooks.html"
torch.autograd.explore(loss, {"x": x}, path=path, trace=rec, title="a tensor hook")
print(f"wrote {path}")
