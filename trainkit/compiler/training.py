"""What the Trainer calls for ``Trainer(compile=True)`` (config ``trainer.compile: true``)."""

from __future__ import annotations

from .compiled import CompiledFunction, compile_forward


def compile_train_step(trainer, **options) -> CompiledFunction:
    """Compile the forward pass of ``trainer.model`` for the Trainer's steps: sets ``trainer.forward``, which
    ``train_step``, ``test_step`` and ``predict_step`` call in place of ``trainer.model``, and returns it.

    The step's own Python (the loss read with ``.item()``, callbacks, metrics, gradient accumulation) stays eager
    around it: the forward is replayed as array kernels and its backward as one graph node, so a callback that
    inspects gradients between backward and the optimizer step sees them as before. The model itself is not
    wrapped, so checkpoints keep their keys. ``trainer.forward.explain()`` prints the plans.

    >>> import trainkit
    >>> class Stub:
    ...     model = trainkit.nn.Linear(2, 1)
    >>> t = Stub(); forward = compile_train_step(t)
    >>> t.forward is forward, forward(trainkit.ones(1, 2)).shape
    (True, trainkit.Size([1, 1]))
    """
    trainer.forward = compile_forward(trainer.model, **options)
    return trainer.forward
