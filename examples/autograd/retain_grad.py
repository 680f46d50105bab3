"""retain_grad(): a non-leaf keeps its gradient in .grad, at the cost of a tensor of its size.

Run: python examples/autograd/retain_grad.py [FOLDER]
In the page, the node marked R keeps its output's gradient; the totals show what that costs in bytes.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
x = torch.randn(100, 100, requires_grad=True)
h = x.tanh()
h.retain_grad()  # h.grad will be filled by backward: 100 x 100 float32 = 40,000 bytes kept
loss = (h * h).sum()
with torch.autograd.explore.record() as rec:
    loss.backward()
print("h.grad kept:", tuple(h.grad.shape), h.grad.numel() * h.grad.element_size(), "bytes")
path = folder / "retain_grad.html"
torch.autograd.explore(loss, {"x": x}, path=path, trace=rec, title="retain_grad")
print(f"wrote {path}")
