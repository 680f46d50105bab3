"""One batch through a built run, as ``trainkit check`` does: forward, loss and backward in train mode, then a
forward in eval mode, with a failure reported as the layer that raised and the shapes and dtypes it was given.

A config can name a model, data and a loss that each load, yet do not fit together (three input columns for a
``Linear(1, ...)``, ten classes for labels up to 25, float targets for ``cross_entropy``); that shows only at the
first batch, so ``check`` runs one. ``trainkit train`` runs one too when its first step fails (``diagnose``), so
that it names the layer as ``check`` does instead of repeating the bare error of an op.
"""

from __future__ import annotations

from typing import Any

from ..autograd.tensor import Tensor
from ..callbacks.base import Callback
from ..layers.module import Module
from ..trainer import Trainer, eval_mode


class BatchCheckError(RuntimeError):
    """One batch failed: the message names the step, the layer, the shapes and dtypes, and a hint."""


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"{tuple(value.shape)} {value.dtype}".replace("trainkit.", "")
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    return type(value).__name__


def _hint(module: Module | None, err: Exception, x: Any) -> str:
    text = str(err)
    name = type(module).__name__ if module is not None else ""
    if name == "Linear" and isinstance(x, Tensor) and x.ndim:
        return (
            f"the layer takes {module.in_features} features and the batch has {x.shape[-1]}: set the model's "
            "input size (model.init_args) to the data's, or choose other data.inputs"
        )
    if name.startswith("Conv") and isinstance(x, Tensor) and x.ndim > 1:
        return (
            f"the layer takes {module.in_channels} channels and the batch has {x.shape[1]} (dimension 1 of "
            "(N, C, H, W)): match the model's in_channels to the data"
        )
    if "dtype" in text or "Long" in text:
        return (
            "the targets' dtype does not fit the loss: class indices (int64) for cross_entropy and nll, floats "
            "of the output's shape for mse, l1 and bce"
        )
    if "out of bounds" in text:
        return "a label is at least the number of classes the model outputs: raise the model's output size"
    return "compare the shapes above with what the layer expects"


def one_batch(trainer: Trainer, dataset: Any, batch_size: int) -> str:
    """Run the first batch of ``dataset`` through ``trainer``'s model and loss, forward and backward in train mode,
    then forward in eval mode; no optimizer step is taken and the gradients are cleared again (a BatchNorm's running
    statistics do see the batch). Returns a line describing the batch; raises ``BatchCheckError`` naming the
    failing layer.

    >>> import trainkit
    >>> from trainkit import nn
    >>> trainer = Trainer(nn.Sequential(nn.Linear(3, 2)), verbose=False)
    >>> one_batch(trainer, trainkit.utils.data.TensorDataset(trainkit.ones(4, 1), trainkit.ones(4, 2)), 4)
    Traceback (most recent call last):
    ...
    trainkit.cli.dry_run.BatchCheckError: forward (train mode) failed in layer '0' (Linear), given (4, 1) float32: ...
    """
    model = trainer.model
    x, y = trainer.unpack_batch(next(iter(trainer.make_loader(dataset, batch_size=batch_size, shard=False))))
    stack: list[tuple[str, Module, Any]] = []
    names = {id(m): n for n, m in model.named_modules()}  # the model itself: ""

    def enter(module, args):
        stack.append((names.get(id(module), type(module).__name__), module, args[0] if len(args) == 1 else args))

    def leave(module, args, output):
        stack.pop()

    handles = [h for m in model.modules() for h in (m.register_forward_pre_hook(enter), m.register_forward_hook(leave))]

    def failure(step: str, err: Exception) -> BatchCheckError:
        name, module, given = stack[-1] if stack else ("", None, x)
        where = (
            ""
            if module is None
            else (
                f" in layer '{name}' ({type(module).__name__})" if name else f" in the model ({type(module).__name__})"
            )
        )
        return BatchCheckError(
            f"{step} failed{where}, given {_describe(given)}: {type(err).__name__}: {err}; hint: "
            f"{_hint(module, err, given)}"
        )

    was_training = model.training
    try:
        model.train()
        try:
            output = model(x)
        except Exception as err:
            raise failure("forward (train mode)", err) from err
        stack.clear()
        try:
            loss = trainer.loss_fn(output, y)
        except Exception as err:
            raise BatchCheckError(
                f"the loss failed on the model's output {_describe(output)} and the targets "
                f"{_describe(y)}: {type(err).__name__}: {err}; hint: {_hint(None, err, y)}"
            ) from err
        try:
            loss.backward()
        except Exception as err:
            raise failure("backward", err) from err
        with eval_mode(model):
            try:
                model(x)
            except Exception as err:
                raise failure("forward (eval mode)", err) from err
    finally:
        for h in handles:
            h.remove()
        trainer.optimizer.zero_grad()
        model.train(was_training)
    return (
        f"one batch: inputs {_describe(x)}, targets {_describe(y)}, output {_describe(output)}, "
        f"loss {float(loss.item()):.6g}"
    )


class FirstStep(Callback):
    """Notes whether a training batch of this process has ended: a failure before that is one a single batch
    reproduces (a model and data that do not fit), which ``diagnose`` can name.

    >>> watch = FirstStep()
    >>> watch.ended
    False
    """

    def __init__(self) -> None:
        super().__init__()
        self.ended = False

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.ended = True


def diagnose(trainer: Trainer, dataset: Any, batch_size: int, err: Exception) -> BatchCheckError | None:
    """After training failed with ``err`` before its first batch ended: what ``one_batch`` says of the same kind of
    error (the layer, the shapes and dtypes, a hint), or None when one batch passes or fails otherwise.

    >>> import trainkit
    >>> from trainkit import nn
    >>> trainer = Trainer(nn.Sequential(nn.Linear(3, 2)), verbose=False)
    >>> data = trainkit.utils.data.TensorDataset(trainkit.ones(4, 1), trainkit.ones(4, 2))
    >>> str(diagnose(trainer, data, 4, RuntimeError("mat1 and mat2 shapes cannot be multiplied")))[:49]
    "forward (train mode) failed in layer '0' (Linear)"
    """
    try:
        one_batch(trainer, dataset, batch_size)
    except BatchCheckError as found:
        return found if type(found.__cause__) is type(err) else None
    except Exception:  # noqa: BLE001  (the data itself fails to load: the first error stands)
        return None
    return None
