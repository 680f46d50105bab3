"""Metrics for the Trainer: accumulated over batches without building graphs, then computed once per epoch."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from .autograd import grad_mode
from .autograd.backend import xp_of
from .autograd.tensor import Tensor


class Metric:
    """Accumulates a sum and a count over batches; ``compute()`` gives the epoch's value.

    ``higher_is_better`` declares the metric's direction (as torchmetrics' attribute of that name): True when a
    larger value is a better model (accuracy), False when a smaller one is (an error), None when it has none.
    ``EarlyStopping`` and ``ModelCheckpoint`` in ``mode='auto'`` read it (``direction``).

    >>> import trainkit
    >>> m = MeanAbsoluteError()
    >>> m.update(trainkit.tensor([1.0, 2.0]), trainkit.tensor([0.0, 2.0])); m.compute()
    0.5
    """

    name = "metric"
    higher_is_better: bool | None = None

    def __init__(self):
        self.total = 0.0
        self.count = 0

    def reset(self) -> None:
        self.total, self.count = 0.0, 0

    def update(self, output: Tensor, target: Tensor) -> None:
        with grad_mode.no_grad():
            total, count = self.batch(output.detach(), target.detach())
        self.total += float(total)
        self.count += int(count)

    def batch(self, output: Tensor, target: Tensor) -> tuple[float, int]:
        raise NotImplementedError

    def compute(self) -> float:
        return self.total / self.count if self.count else float("nan")


def _check_same_shape(name: str, output: Tensor, target: Tensor) -> None:
    if tuple(output.shape) != tuple(target.shape):
        raise ValueError(f"{name}: output shape {tuple(output.shape)} and target shape {tuple(target.shape)} differ")


class MeanAbsoluteError(Metric):
    name = "mae"
    higher_is_better = False

    def batch(self, output, target):
        _check_same_shape(self.name, output, target)
        return (output - target).abs().sum().item(), output.numel()


class MeanSquaredError(Metric):
    name = "mse"
    higher_is_better = False

    def batch(self, output, target):
        _check_same_shape(self.name, output, target)
        return ((output - target) ** 2).sum().item(), output.numel()


class RootMeanSquaredError(MeanSquaredError):
    name = "rmse"

    def compute(self) -> float:
        return math.sqrt(super().compute())


def class_scores(output, target, name: str) -> tuple:
    """Scores as a (samples, classes) array and the target classes as int64 (samples,), from (N, C) and (N,), a
    sequence's (N, T, C) and (N, T) (classes last, as a language model returns them), or torch's K-dimensional
    cross_entropy layout (N, C, d1, ...) and (N, d1, ...). ``name`` is the metric's, for the error.

    >>> import trainkit
    >>> scores, labels = class_scores(trainkit.zeros(2, 3, 4), trainkit.zeros(2, 3), "accuracy")
    >>> scores.shape, labels.shape
    ((6, 4), (6,))
    """
    scores, labels = output._data, target._data
    xp = xp_of(scores)
    deeper = scores.ndim == labels.ndim + 1 and scores.ndim > 2
    if deeper and tuple(scores.shape[:-1]) == tuple(labels.shape):
        scores = scores.reshape(-1, scores.shape[-1])
    elif deeper and tuple(scores.shape[:1] + scores.shape[2:]) == tuple(labels.shape):
        scores = xp.moveaxis(scores, 1, -1).reshape(-1, scores.shape[1])
    elif scores.ndim != 2 or labels.shape != scores.shape[:1]:
        raise ValueError(
            f"{name}: logits of shape {tuple(output.shape)} do not fit targets of shape "
            f"{tuple(target.shape)}: expected (N, C) and (N,), or (N, T, C) and (N, T)"
        )
    return scores, labels.reshape(-1).astype(xp.int64)


class Accuracy(Metric):
    """Share of samples whose top class is the target (scores laid out as ``class_scores`` takes them; for one
    output column, output > 0)."""

    name = "accuracy"
    higher_is_better = True

    def batch(self, output, target):
        if output.ndim >= 2 and output.shape[1] > 1 or output.ndim > 2:
            scores, labels = class_scores(output, target, self.name)
            return int((scores.argmax(axis=1) == labels).sum()), int(labels.size)
        predicted = (output.reshape(target.shape) > 0).long()
        return (predicted == target.long()).sum().item(), target.numel()


class TopKAccuracy(Metric):
    """Share of samples whose target is among the ``k`` highest scores (laid out as ``class_scores`` takes them)."""

    higher_is_better = True

    def __init__(self, k: int = 5):
        super().__init__()
        self.k = k
        self.name = f"top{k}_accuracy"

    def batch(self, output, target):
        data, labels = class_scores(output, target, self.name)
        k = min(self.k, data.shape[1])
        top = xp_of(data).argpartition(-data, k - 1, axis=1)[:, :k]
        hit = (top == labels.reshape(-1, 1)).any(axis=1)
        return float(hit.sum()), int(labels.size)


class Perplexity(Metric):
    """``exp`` of the mean cross-entropy (natural log) of the logits against class indices: the number of equally
    likely tokens a language model is as unsure as. Logits of shape (N, V) go with targets (N,); a sequence's
    (N, T, V) with (N, T) (classes last, as a language model returns them) or (N, V, T) (torch's K-dimensional
    cross_entropy layout); every target counts once.

    >>> import trainkit
    >>> m = Perplexity()
    >>> m.update(trainkit.zeros(2, 3, 4), trainkit.tensor([[0, 1, 2], [3, 0, 1]])); round(m.compute(), 4)
    4.0
    """

    name = "perplexity"
    higher_is_better = False

    def batch(self, output, target):
        logits, labels = class_scores(output, target, self.name)
        xp = xp_of(logits)
        if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[1]):
            raise ValueError(
                f"perplexity: target ids must lie in [0, {logits.shape[1]}), got {labels.min()} to {labels.max()}"
            )
        shifted = logits.astype(xp.float64) - logits.max(axis=1, keepdims=True)
        log_norm = xp.log(xp.exp(shifted).sum(axis=1))
        nll = log_norm - shifted[xp.arange(len(labels)), labels]
        return float(nll.sum()), int(labels.size)

    def compute(self) -> float:
        return math.exp(super().compute()) if self.count else float("nan")


_BY_NAME = {
    "mae": MeanAbsoluteError,
    "mse": MeanSquaredError,
    "rmse": RootMeanSquaredError,
    "accuracy": Accuracy,
    "acc": Accuracy,
    "perplexity": Perplexity,
    "ppl": Perplexity,
}


def get_metric(spec) -> Metric:
    """A metric from its name ('mae', 'mse', 'rmse', 'accuracy', 'top5_accuracy', 'perplexity') or a Metric
    instance."""
    if isinstance(spec, Metric):
        return spec
    if isinstance(spec, str):
        found = re.fullmatch(r"top_?(\d+)_accuracy", spec)
        if found:
            return TopKAccuracy(int(found.group(1)))
        if spec in _BY_NAME:
            return _BY_NAME[spec]()
    known = ", ".join(sorted(_BY_NAME) + ["topK_accuracy"])
    raise ValueError(f"unknown metric {spec!r}: use one of {known} or a Metric instance")


# Names whose direction is known without a Metric object, as Keras infers it for its callbacks' mode='auto'
# ('acc' anywhere in the name, and the usual scores); everything that names an error or a divergence goes down.
_HIGHER_WORDS = frozenset(("auc", "precision", "recall", "f1", "fbeta", "iou", "miou", "dice", "r2", "specificity"))
_LOWER_WORDS = frozenset(
    ("mae", "mse", "rmse", "msle", "mape", "perplexity", "ppl", "crossentropy", "entropy", "hinge", "kld", "nll")
)


def direction(name: str, metrics: Iterable[Metric] = ()) -> str | None:
    """Whether a logged quantity is better lower (``'min'``) or higher (``'max'``), or None when its name does not
    say: what ``mode='auto'`` of ``EarlyStopping`` and ``ModelCheckpoint`` uses.

    A ``val_`` prefix is ignored. ``loss`` (and any name ending in ``loss``) is ``'min'``; a metric of ``metrics``
    (the Trainer's) of that ``name`` decides by its ``higher_is_better``; then a metric ``get_metric`` knows by that
    name; then the name itself: ``'max'`` when it holds ``acc`` or is a score (``auc``, ``precision``, ``recall``,
    ``f1``, ``iou``, ``dice``, ``r2``, ...), ``'min'`` for an error (``error``, ``mse``, ``crossentropy``, ...).

    >>> direction("val_loss"), direction("val_accuracy"), direction("val_top3_accuracy"), direction("mae")
    ('min', 'max', 'max', 'min')
    >>> direction("val_f1_score"), direction("mean_absolute_error"), direction("lr")
    ('max', 'min', None)
    >>> class Dice(Metric):
    ...     name, higher_is_better = "overlap", True
    >>> direction("val_overlap", [Dice()])
    'max'
    """
    key = name[len("val_") :] if name.startswith("val_") else name
    if key.endswith("loss"):
        return "min"
    for metric in metrics:
        if getattr(metric, "name", None) == key and getattr(metric, "higher_is_better", None) is not None:
            return "max" if metric.higher_is_better else "min"
    known = _BY_NAME.get(key) or (TopKAccuracy if re.fullmatch(r"top_?(\d+)_accuracy", key) else None)
    if known is not None and known.higher_is_better is not None:
        return "max" if known.higher_is_better else "min"
    lowered = key.lower()
    words = set(re.split(r"[^a-z0-9]+", lowered))
    if "acc" in lowered or words & _HIGHER_WORDS:
        return "max"
    if "error" in lowered or words & _LOWER_WORDS:
        return "min"
    return None
