"""``ActivationGradientMonitor``: gradient norms of chosen layers' outputs, through ``retain_grad()``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..autograd.grad_mode import is_grad_enabled
from ..autograd.tensor import Tensor
from .base import Callback, Logs

MEMORY_NOTE = (
    "retain_grad() keeps a full gradient tensor, the size of the output, for each monitored output from backward "
    "until the monitor has read it (at the latest, until the next forward replaces the output)"
)


def first_tensor(output: Any) -> Tensor | None:
    """The tensor a layer's output stands for: the output itself, or the first tensor of a tuple (a recurrent
    layer's ``(output, h_n)``, attention's ``(output, weights)``) or of a ``PackedSequence`` (its ``data``).

    >>> import trainkit
    >>> out = trainkit.ones(2)
    >>> first_tensor((out, (out, out))) is out
    True
    """
    while isinstance(output, tuple) and output:
        output = output[0]
    return output if isinstance(output, Tensor) else None


class ActivationGradientMonitor(Callback):
    """Records the gradient norm of the outputs of the named sub-modules (``model.get_submodule(name)``).

    A forward hook on each named module calls ``retain_grad()`` on its output (the first tensor of a tuple or
    ``PackedSequence``: a recurrent layer's output sequence, attention's output) while training with grad enabled;
    after ``loss.backward()`` (``on_after_backward``) the norm of ``output.grad`` is recorded and the outputs are
    let go. The epoch logs get ``act_grad_norm/<name>``, the mean over the epoch's recorded steps; ``last`` holds
    the latest step's norms.

    Memory: ``retain_grad()`` makes backward keep one extra tensor per monitored output, as large as the
    output (a batch of activations), alive until the next forward at the latest. For parameters
    ``GradientMonitor`` avoids that cost with tensor hooks that keep only statistics; here the retained gradients
    are the point, so monitor a few layers, or set ``log_every`` to retain only every few steps.

    Args:
        layers (Iterable[str], required): the names of the sub-modules whose outputs are watched, as
            ``named_modules`` names them (``'encoder.0'``).
        log_every (int, default 1): retain and record the gradients at the optimizer steps where
            ``global_step % log_every == 0``.
        verbose (bool, default True): print, at train begin, what the retained gradients cost in memory.

    >>> import trainkit
    >>> from trainkit import nn
    >>> model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> class Trainer:
    ...     pass
    >>> trainer = Trainer(); trainer.model, trainer.global_step = model, 0
    >>> monitor = ActivationGradientMonitor(["0"], verbose=False)
    >>> monitor.set_trainer(trainer)
    >>> monitor.on_train_begin()
    >>> monitor.on_train_batch_begin(0)
    >>> model(trainkit.ones(4, 2)).sum().backward()
    >>> monitor.on_after_backward()
    >>> sorted(monitor.last)
    ['act_grad_norm/0']
    >>> monitor.on_train_end()
    """

    rank_zero_only = True

    def __init__(self, layers: Iterable[str], log_every: int = 1, verbose: bool = True) -> None:
        super().__init__()
        self.layers = list(layers)
        if not self.layers:
            raise ValueError("ActivationGradientMonitor needs at least one layer name")
        self.log_every = log_every
        self.verbose = verbose
        self.handles: list[Any] = []
        self.outputs: dict[str, Tensor] = {}
        self.last: dict[str, float] = {}
        self._epoch: dict[str, list[float]] = {}
        self._active = False

    def on_train_begin(self, logs: Logs | None = None) -> None:
        model = self.model
        names = {name for name, _ in model.named_modules()}
        unknown = [n for n in self.layers if n not in names]
        if unknown:
            raise ValueError(
                f"ActivationGradientMonitor: no sub-module named {', '.join(map(repr, unknown))}; "
                f"the model has {', '.join(repr(n) for n in sorted(names) if n)}"
            )
        self.handles = [model.get_submodule(n).register_forward_hook(self._hook_for(n)) for n in self.layers]
        if self.verbose:
            print(f"ActivationGradientMonitor on {', '.join(self.layers)}: {MEMORY_NOTE}.")

    def _hook_for(self, name: str):
        def hook(module, args, output):
            # validation and inference run without grad: nothing to retain there
            if self._active and module.training and is_grad_enabled():
                output = first_tensor(output)
                if output is not None and output.requires_grad:
                    output.retain_grad()
                    self.outputs[name] = output
            return None

        return hook

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._epoch = {}

    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        self._active = self.trainer.global_step % self.log_every == 0
        self.outputs = {}

    def on_after_backward(self) -> None:
        norms = {}
        for name, output in self.outputs.items():
            grad = output.grad
            if grad is not None:
                norms[f"act_grad_norm/{name}"] = math.sqrt(float((grad.detach().float() ** 2).sum()))
        self.outputs = {}  # drop the outputs, and with them their retained gradients
        if norms:
            self.last = norms
            for key, value in norms.items():
                self._epoch.setdefault(key, []).append(value)

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        self._active = False
        self.outputs = {}

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if logs is not None:
            for key, values in self._epoch.items():
                logs[key] = sum(values) / len(values) if values else math.nan

    def remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.outputs = {}

    def on_train_end(self, logs: Logs | None = None) -> None:
        self.remove_hooks()

    def on_exception(self, exc: BaseException) -> None:
        self.remove_hooks()

    def __repr__(self) -> str:
        return f"ActivationGradientMonitor({self.layers!r}, log_every={self.log_every})"
