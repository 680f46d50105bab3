"""In-place changes and _version: a tensor saved for backward and then changed in place makes backward fail.

Run: python examples/autograd/inplace_version.py [FOLDER]
In the page, ExpBackward0 has a red border: the tensor it saved is at version 1, it was saved at version 0. The
forward pass runs under detect_anomaly(), so the page and the error also name the line of the in-place change.
"""

import sys
import tempfile
from pathlib import Path

import trainkit as torch

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="explore-"))
x = torch.tensor([0.5, 1.0, 1.5], requires_grad=True)
with torch.autograd.detect_anomaly():
    y = x.exp()  # ExpBackward0 saves its output y: d exp(x)/dx = exp(x)
    y.add_(1)  # changes y in place: y._version goes from 0 to 1
    loss = y.sum()
    path = folder / "inplace_version.html"
    torch.autograd.explore(loss, {"x": x}, path=path, title="a stale saved tensor")
    try:
        loss.backward()
    except RuntimeError as err:
        print("backward failed as expected:", err)
# the fix: change a clone (or compute out of place), so the saved value stays as it was
y = x.exp()
z = y.clone().add_(1)
z.sum().backward()
print("with clone(): x.grad =", x.grad)
print(f"wrote {path}")
