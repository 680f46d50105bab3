"""``PlotCallback``: loss, metric and gradient-norm curves as an image at train end (needs matplotlib)."""

from __future__ import annotations

import math
import os
from typing import Any

from ..autograd.user_warnings import warn_user
from .base import Callback, Logs, plain
from .csv_logger import resolve

NO_MATPLOTLIB = (
    "PlotCallback: matplotlib is not installed, so no curves are drawn (training goes on); "
    "`pip install matplotlib` to get them"
)


def _matplotlib_figure() -> Any:
    """matplotlib's ``Figure`` class, or None without matplotlib. ``Figure`` needs no GUI backend or pyplot."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


class PlotCallback(Callback):
    """Draws the epoch curves into ``filename`` (relative to the run's ``run_dir`` when there is one) at
    train end, and when training stops on an exception (Ctrl-C included): one panel per quantity, ``loss`` with
    ``val_loss``, each metric with its ``val_`` twin, ``lr``, the ``grad_norm/...`` curves of ``GradientMonitor``
    and the ``act_grad_norm/...`` curves of ``ActivationGradientMonitor`` together on log scales. A quantity that
    never changes (a constant ``lr``) gets no panel: the figure's title states it. The loss panel marks the best
    epoch (lowest ``val_loss``, else ``loss``).

    matplotlib is optional: without it, a warning at train begin says so, once, and nothing is drawn. The x axis
    counts epochs from 1, as the console does.

    Args:
        filename (str | os.PathLike, default 'curves.png'): the image file; a relative one is inside the run
            folder.

    >>> import tempfile, pathlib, warnings
    >>> plot = PlotCallback(pathlib.Path(tempfile.mkdtemp()) / "curves.png")
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     plot.on_train_begin()
    ...     plot.on_epoch_end(0, {"loss": 1.0, "val_loss": 1.2})
    ...     plot.on_train_end()
    >>> plot.panels()
    [('loss', ['loss', 'val_loss'])]
    """

    rank_zero_only = True

    order = Callback.RECORD

    def __init__(self, filename: str | os.PathLike = "curves.png") -> None:
        super().__init__()
        self.filename = filename
        self.records: dict[str, list[Any]] = {"epoch": []}
        self.path = None
        self._warned = False

    def _available(self) -> bool:
        if _matplotlib_figure() is not None:
            return True
        if not self._warned:
            warn_user(NO_MATPLOTLIB)
            self._warned = True
        return False

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._available()

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        n = len(self.records["epoch"])
        self.records["epoch"].append(epoch)
        for key, value in (logs or {}).items():
            value = plain(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.records.setdefault(key, [None] * n).append(float(value))
        for values in self.records.values():
            if len(values) < n + 1:
                values.append(None)

    def constants(self) -> dict[str, float]:
        """The quantities that kept one value over the whole run (drawn as text, not as a panel)."""
        out = {}
        for key, values in self.records.items():
            seen = {v for v in values if v is not None}
            if key != "epoch" and "/" not in key and len(seen) == 1 and len(self.records["epoch"]) > 1:
                out[key] = seen.pop()
        return out

    def panels(self) -> list[tuple[str, list[str]]]:
        """``(title, keys)`` of each panel, in drawing order."""
        constants = self.constants()
        keys = [k for k in self.records if k != "epoch"]
        out = []
        for key in keys:
            if "/" in key or key.startswith("val_") or key in constants:
                continue
            twin = f"val_{key}"
            out.append((key, [key, twin] if twin in self.records else [key]))
        out += [
            (k, [k])
            for k in keys
            if k.startswith("val_") and "/" not in k and k[4:] not in self.records and k not in constants
        ]
        for title, prefix in (("gradient norm", "grad_norm/"), ("activation gradient norm", "act_grad_norm/")):
            curves = [k for k in keys if k.startswith(prefix)]
            if curves:
                out.append((title, curves))
        return out

    def best_epoch(self) -> int | None:
        """The epoch (1-based) of the lowest ``val_loss``, else of the lowest ``loss``; None without either."""
        key = "val_loss" if "val_loss" in self.records else "loss"
        points = [
            (v, e + 1) for e, v in zip(self.records["epoch"], self.records.get(key, [])) if v is not None and v == v
        ]
        return min(points)[1] if points else None

    def on_train_end(self, logs: Logs | None = None) -> None:
        self.draw()

    def on_exception(self, exc: BaseException) -> None:
        self.draw()  # the epochs finished before an interruption or a failure are worth a look too

    def draw(self) -> None:
        """Write the figure of the epochs recorded so far (nothing without matplotlib or epochs)."""
        if not self.records["epoch"] or not self._available():
            return
        figure_class = _matplotlib_figure()
        panels = self.panels() or [("loss", [])]
        cols = min(len(panels), 3)
        rows = math.ceil(len(panels) / cols)
        fig = figure_class(figsize=(5 * cols, 3.5 * rows), layout="constrained")
        epochs = [e + 1 for e in self.records["epoch"]]
        for i, (title, keys) in enumerate(panels):
            ax = fig.add_subplot(rows, cols, i + 1)
            for key in keys:
                points = [(e, v) for e, v in zip(epochs, self.records[key]) if v is not None]
                if points:
                    ax.plot(*zip(*points), marker="o" if len(points) < 30 else None, label=key)
            if title in ("gradient norm", "activation gradient norm", "lr"):
                ax.set_yscale("log")
            if title == "loss" and self.best_epoch() is not None:
                ax.axvline(
                    self.best_epoch(),
                    color="grey",
                    linestyle="--",
                    linewidth=1,
                    label=f"best epoch {self.best_epoch()}",
                )
            ax.set_title(title)
            ax.set_xlabel("epoch")
            ax.legend(fontsize="small")
        constants = self.constants()
        if constants:
            fig.suptitle("constant: " + ", ".join(f"{k} {v:g}" for k, v in constants.items()), fontsize="small")
        self.path = resolve(self.filename, self.run_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(self.path)

    def __repr__(self) -> str:
        return f"PlotCallback({str(self.filename)!r})"
