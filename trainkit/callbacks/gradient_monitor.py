"""``GradientMonitor``: per-parameter gradient statistics from tensor hooks, without keeping any gradient."""

from __future__ import annotations

import math
import sys
import weakref
from typing import Any, TextIO

from ..autograd.grad_mode import no_grad
from ..autograd.ops.shape import stack
from ..autograd.user_warnings import warn_user
from .base import Callback, Logs

STATS = ("grad_norm", "grad_max", "grad_zero_frac", "grad_nonfinite")


class GradientMonitor(Callback):
    """Watches the gradient of every trainable parameter through ``register_hook``.

    Each hook turns the gradient it receives into four numbers (its L2 norm, max ``|g|``, the fraction of zeros,
    the count of NaN/Inf) and returns without storing the gradient, so monitoring keeps no gradient alive: the
    hook's gradient is freed as if there were no hook (``retain_grad()`` would instead keep a full copy per
    tensor; see ``ActivationGradientMonitor``). The statistics stay on the gradient's device until the step ends,
    then are read back in one transfer.

    Every ``log_every`` optimizer steps (the steps where ``global_step % log_every == 0``) it records them. At
    epoch end it adds to the epoch logs, for each parameter name and for ``global`` (the norm of all gradients
    together): ``grad_norm/<name>`` (mean over the recorded steps of the epoch), ``grad_max/<name>`` (largest),
    ``grad_zero_frac/<name>`` (mean) and ``grad_nonfinite/<name>`` (total count). ``last`` holds the latest
    step's figures, ``summary`` the whole run's.

    A parameter whose gradient norm at a recorded step falls below ``vanishing`` (default 1e-7), rises above
    ``exploding`` (default 1e3) or holds a NaN or Inf is warned about (once per parameter and kind) and counted.
    At train end it prints a table of the run and removes every hook: per parameter the optimizer steps it was
    trained for (``steps``), the steps recorded (``logged``), the last and mean gradient norm, the largest
    ``|g|``, the share of zeros, the NaN/Inf count, and a status: ``ok``, or each kind of trouble with the number
    of recorded steps that showed it (``vanishing (12 steps)``).

    Hooks follow freezing: parameters are re-checked at each batch begin; a parameter that becomes trainable
    gets a hook, one that is frozen loses it. The figures are of the gradients as backward computes them, before
    any clipping; with several backward passes per optimizer step (gradient accumulation), of the last one.

    Args:
        log_every (int, default 1): record the statistics at the optimizer steps where ``global_step % log_every ==
            0``.
        vanishing (float, default 1e-7): warn about a parameter whose gradient norm falls below this.
        exploding (float, default 1e3): warn about a parameter whose gradient norm rises above this.
        file (TextIO | None, default None): the stream of the table printed at train end; None: standard output.

    >>> import trainkit
    >>> from trainkit import nn
    >>> model = nn.Linear(3, 1)
    >>> class Trainer:
    ...     pass
    >>> trainer = Trainer(); trainer.model, trainer.global_step = model, 0
    >>> import io
    >>> monitor = GradientMonitor(file=io.StringIO())  # the table printed at train end goes here
    >>> monitor.set_trainer(trainer)
    >>> monitor.on_train_begin()
    >>> monitor.on_train_batch_begin(0)
    >>> model(trainkit.ones(2, 3)).sum().backward()
    >>> monitor.on_before_optimizer_step(None)
    >>> round(monitor.last["grad_norm/weight"], 4), monitor.last["grad_norm/bias"]
    (3.4641, 2.0)
    >>> monitor.on_train_end(); len(monitor.handles)
    0
    """

    rank_zero_only = True

    def __init__(
        self, log_every: int = 1, vanishing: float = 1e-7, exploding: float = 1e3, file: TextIO | None = None
    ) -> None:
        super().__init__()
        if log_every < 1:
            raise ValueError(f"log_every must be at least 1, got {log_every}")
        self.log_every = log_every
        self.vanishing = vanishing
        self.exploding = exploding
        self.file = file
        self.handles: dict[str, Any] = {}  # parameter name -> hook handle
        self.last: dict[str, float] = {}
        self.summary: dict[str, dict[str, float]] = {}
        self._pending: dict[str, Any] = {}  # name -> 4-element tensor of this step's statistics
        self._position: dict[str, int] = {}  # name -> place in the model, to report in the model's order
        self._epoch: dict[str, list[float]] = {}
        self._active = False
        self._warned: set[tuple[str, str]] = set()
        self._steps: dict[str, int] = {}  # name -> optimizer steps taken while it was trainable ("global": all)

    # ----------------------------------------------------------------------------------------------------- hooks
    def _hook_for(self, name: str):
        # the hook lives on the parameter; a weak reference lets a dropped monitor go, its hooks then doing nothing
        ref = weakref.ref(self)

        def hook(grad):
            monitor = ref()
            if monitor is not None and monitor._active:
                with no_grad():
                    g = grad.detach().float()
                    n = max(g.numel(), 1)
                    monitor._pending[name] = stack(
                        [(g * g).sum(), g.abs().max(), (g == 0).sum().float() / n, (~g.isfinite()).sum().float()]
                    )
            return None  # the gradient passes on unchanged, and nothing here refers to it any more

        return hook

    def _sync_hooks(self) -> None:
        """Hook every trainable parameter, unhook frozen ones: follows freezing and unfreezing."""
        trainable = dict(self.model.named_parameters())
        self._position = {name: i for i, name in enumerate(trainable)}
        for name, p in trainable.items():
            if p.requires_grad and name not in self.handles:
                self.handles[name] = p.register_hook(self._hook_for(name))
            elif not p.requires_grad and name in self.handles:
                self.handles.pop(name).remove()
        for name in [n for n in self.handles if n not in trainable]:
            self.handles.pop(name).remove()

    def remove_hooks(self) -> None:
        for handle in self.handles.values():
            handle.remove()
        self.handles.clear()

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.summary, self.last, self._warned, self._steps = {}, {}, set(), {}
        self._sync_hooks()

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._epoch = {}

    def on_train_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        self._sync_hooks()
        self._active = self.trainer.global_step % self.log_every == 0
        self._pending = {}

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        self._commit()
        for name in [*self.handles, "global"]:
            self._steps[name] = self._steps.get(name, 0) + 1
            if name in self.summary:
                self.summary[name]["steps"] = self._steps[name]

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        # no commit here: with gradient accumulation a batch may end without an optimizer step
        self._active = False

    # ------------------------------------------------------------------------------------------------ recording
    def _commit(self) -> None:
        if not self._pending:
            return
        # hooks fire in backward order (last layer first); report in the model's order
        names = sorted(self._pending, key=lambda n: self._position.get(n, len(self._position)))
        rows = stack([self._pending[n] for n in names]).tolist()  # one device-to-host transfer per step
        self._pending = {}
        figures: dict[str, float] = {}
        total_sq = 0.0
        for name, (sq, gmax, zero_frac, nonfinite) in zip(names, rows):
            norm = math.sqrt(sq) if sq == sq else math.nan
            total_sq += sq
            figures.update(
                {
                    f"grad_norm/{name}": norm,
                    f"grad_max/{name}": gmax,
                    f"grad_zero_frac/{name}": zero_frac,
                    f"grad_nonfinite/{name}": int(nonfinite),
                }
            )
            self._update_summary(name, norm, gmax, zero_frac, int(nonfinite))
            self._check(name, norm, int(nonfinite))
        figures["grad_norm/global"] = math.sqrt(total_sq) if total_sq == total_sq else math.nan
        self._update_summary("global", figures["grad_norm/global"], None, None, None)
        self.last = figures
        for key, value in figures.items():
            self._epoch.setdefault(key, []).append(value)

    def _update_summary(self, name: str, norm: float, gmax, zero_frac, nonfinite) -> None:
        s = self.summary.setdefault(
            name,
            {
                "steps": self._steps.get(name, 0),
                "logged": 0,
                "last_norm": 0.0,
                "mean_norm": 0.0,
                "max_abs": 0.0,
                "zero_frac": 0.0,
                "nonfinite": 0,
                "vanishing": 0,
                "exploding": 0,
                "nonfinite_steps": 0,
            },
        )
        s["logged"] += 1
        s["last_norm"] = norm
        s["mean_norm"] += (norm - s["mean_norm"]) / s["logged"]  # running mean: nothing grows with the steps
        if gmax is not None:
            s["max_abs"] = max(s["max_abs"], gmax) if gmax == gmax else math.nan
            s["zero_frac"] += (zero_frac - s["zero_frac"]) / s["logged"]
            s["nonfinite"] += nonfinite

    def _check(self, name: str, norm: float, nonfinite: int) -> None:
        if nonfinite:
            kind, what = "nonfinite_steps", f"{nonfinite} NaN/Inf values in its gradient"
        elif norm < self.vanishing:
            kind, what = "vanishing", f"a vanishing gradient (norm {norm:.3g} < {self.vanishing:g})"
        elif norm > self.exploding:
            kind, what = "exploding", f"an exploding gradient (norm {norm:.3g} > {self.exploding:g})"
        else:
            return
        self.summary[name][kind] += 1
        if (name, kind) not in self._warned:
            self._warned.add((name, kind))
            step = self.trainer.global_step
            warn_user(f"GradientMonitor: '{name}' has {what} at step {step}", RuntimeWarning)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if logs is None:
            return
        for key, values in self._epoch.items():
            if key.startswith("grad_max/"):
                logs[key] = max(values) if all(v == v for v in values) else math.nan
            elif key.startswith("grad_nonfinite/"):
                logs[key] = sum(values)
            else:
                logs[key] = sum(values) / len(values)

    # ------------------------------------------------------------------------------------------------------- end
    def table(self) -> str:
        """The run's figures, one row per parameter, flagged when vanishing, exploding or non-finite."""
        header = (
            f"{'parameter':<32} {'steps':>6} {'logged':>6} {'last norm':>11} {'mean norm':>11} {'max |g|':>11} "
            f"{'zeros':>6} {'NaN/Inf':>8}  status"
        )
        lines = [header, "-" * len(header)]
        last = len(self._position)
        order = sorted(self.summary, key=lambda n: last + 1 if n == "global" else self._position.get(n, last))
        for name in order:
            s = self.summary[name]
            row = f"{name:<32} {s['steps']:>6} {s['logged']:>6} {s['last_norm']:>11.4g} {s['mean_norm']:>11.4g}"
            if name == "global":
                lines.append(row)
                continue
            troubles = [
                f"{label} ({s[key]} step{'s' if s[key] > 1 else ''})"
                for key, label in (
                    ("nonfinite_steps", "non-finite"),
                    ("vanishing", "vanishing"),
                    ("exploding", "exploding"),
                )
                if s[key]
            ]
            lines.append(
                f"{row} {s['max_abs']:>11.4g} {s['zero_frac']:>6.1%} {s['nonfinite']:>8}  {', '.join(troubles) or 'ok'}"
            )
        lines.append(
            f"status: at a logged step, vanishing = gradient norm < {self.vanishing:g}, exploding = norm > "
            f"{self.exploding:g}, non-finite = NaN or Inf in the gradient"
        )
        return "\n".join(lines)

    def on_train_end(self, logs: Logs | None = None) -> None:
        self.remove_hooks()
        if self.summary:
            print(self.table(), file=self.file if self.file is not None else sys.stdout)

    def on_exception(self, exc: BaseException) -> None:
        self.remove_hooks()

    def __repr__(self) -> str:
        return (
            f"GradientMonitor(log_every={self.log_every}, vanishing={self.vanishing:g}, exploding={self.exploding:g})"
        )
