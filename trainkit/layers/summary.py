"""``summary``: a Keras-style table of a model's layers, output shapes and parameter counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..autograd import grad_mode
from ..autograd.creation import zeros
from ..autograd.tensor import Tensor

if TYPE_CHECKING:  # module.py imports this module for Module.summary
    from .module import Module


def _shape_of(output) -> str:
    if isinstance(output, Tensor):
        return str(list(output.shape))
    if isinstance(output, (tuple, list)):
        return ", ".join(_shape_of(o) for o in output)
    return type(output).__name__


def summary(model: Module, input_shape, *, batch_size: int = 1, dtype=None, device=None, print_fn=print) -> str:
    """Run one forward pass on zeros of shape ``(batch_size, *input_shape)`` and tabulate every leaf layer.

    The totals count each shared parameter once and split trainable (``requires_grad``) from frozen ones.
    Returns the table and hands it to ``print_fn`` (None to stay quiet).

    >>> from trainkit import nn
    >>> net = nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1))
    >>> table = summary(net, (1,), print_fn=None)
    >>> print(table.splitlines()[-3])
    Total params: 31
    """
    rows = []
    handles = []
    root_name = type(model).__name__
    for name, module in model.named_modules():
        if any(True for _ in module.children()):
            continue

        def record(m, args, output, name=name or root_name):
            own = sum(p.numel() for p in m.parameters(recurse=False))
            rows.append((f"{name} ({type(m).__name__})", _shape_of(output), own))

        handles.append(module.register_forward_hook(record))
    shapes = input_shape if input_shape and isinstance(input_shape[0], (tuple, list)) else [input_shape]
    inputs = [zeros((batch_size, *shape), dtype=dtype, device=device) for shape in shapes]
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with grad_mode.no_grad():
            model(*inputs)
    finally:
        for m, mode in modes:
            object.__setattr__(m, "training", mode)
        for handle in handles:
            handle.remove()

    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    frozen = sum(p.numel() for p in params if not p.requires_grad)
    headers = ("Layer (type)", "Output Shape", "Param #")
    widths = [max(len(headers[i]), *(len(str(r[i])) for r in rows)) + 4 for i in range(3)] if rows else [16, 16, 10]
    line = "=" * sum(widths)

    def fmt(cells) -> str:
        return "".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    lines = [
        fmt(headers),
        line,
        *(fmt((n, s, f"{c:,}")) for n, s, c in rows),
        line,
        f"Total params: {trainable + frozen:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {frozen:,}",
    ]
    table = "\n".join(lines)
    if print_fn is not None:
        print_fn(table)
    return table
