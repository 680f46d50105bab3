"""What the Trainer calls for ``Trainer(compile=True)``: its training step, compiled."""

from __future__ import annotations

from .compiled import compile


def compile_train_step(trainer, **options):
    """Compile ``trainer.train_step`` in place: each batch's forward, loss, backward and optimizer update become
    one replayed plan (a step the plan cannot replay, with gradient clipping or dropout say, runs eagerly).
    Returns the compiled step; ``trainer.train_step.explain()`` prints it.

    >>> import trainkit
    >>> class Stub:
    ...     def train_step(self, batch):
    ...         return {"loss": 0.0}
    >>> t = Stub(); step = compile_train_step(t)
    >>> t.train_step is step
    True
    """
    step = compile(trainer.train_step, **options)
    trainer.train_step = step
    return step
