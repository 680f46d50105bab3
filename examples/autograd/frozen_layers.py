"""Frozen layers: parameters with requires_grad=False get no AccumulateGrad node, and ops on them alone are not
recorded at all.

Run: python examples/autograd/frozen_layers.py [FOLDER]
In the page, only the head's parameters are in the graph; the frozen body is listed under "named tensors with no
node here", and the body's output appears as a saved input leaf of the head.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch
from trainkit import nn

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
for p in model[:4].parameters():  # freeze the body: fine-tune the head only
    p.requires_grad_(False)
loss = model(torch.randn(32, 4)).pow(2).mean()
with torch.autograd.explore.record() as rec:
    loss.backward()
frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
print("frozen:", frozen, " head grad:", tuple(model[4].weight.grad.shape))
path = folder / "frozen_layers.html"
torch.autograd.explore(loss, model, path=path, trace=rec, title="frozen layers")
print(f"wrote {path}")
