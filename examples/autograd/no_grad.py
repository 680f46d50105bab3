"""no_grad(): nothing computed inside it is recorded, so its results are leaves outside the graph.

Run: python examples/autograd/no_grad.py [FOLDER]
In the page, the scale computed under no_grad appears only as a saved input leaf with requires_grad=False.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
w = torch.randn(5, requires_grad=True)
with torch.no_grad():
    scale = w.abs().max()  # recorded nowhere: a leaf that does not require grad
loss = (w / scale).pow(2).sum()
with torch.autograd.explore.record() as rec:
    loss.backward()
print("scale.requires_grad =", scale.requires_grad, " scale.is_leaf =", scale.is_leaf)
path = folder / "no_grad.html"
torch.autograd.explore(loss, {"w": w, "scale": scale}, path=path, trace=rec, title="no_grad")
print(f"wrote {path}")
