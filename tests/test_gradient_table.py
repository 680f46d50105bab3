"""GradientMonitor's end-of-run table: "steps" counts optimizer steps, "logged" the recorded ones, and "status"
names the trouble each parameter showed (or ok), with the thresholds stated under the table."""

from __future__ import annotations

import io

import trainkit
from trainkit import nn
from trainkit.callbacks import GradientMonitor
from trainkit.trainer import Trainer


class Faint(nn.Module):
    """A model whose second layer gets gradients far below the vanishing threshold."""

    def __init__(self):
        super().__init__()
        self.strong = nn.Linear(1, 1)
        self.faint = nn.Linear(1, 1)

    def forward(self, x):
        return self.strong(x) + 1e-12 * self.faint(x)


def test_the_table_counts_optimizer_steps_and_flags_vanishing_gradients():
    trainkit.manual_seed(0)
    monitor = GradientMonitor(log_every=2, file=io.StringIO())
    trainer = Trainer(Faint(), loss="mse", callbacks=[monitor], verbose=False)
    x = trainkit.linspace(-1, 1, 24).unsqueeze(1)
    trainer.fit(x, 2 * x, epochs=2, batch_size=4)  # 12 optimizer steps, 6 of them logged
    rows = {line.split()[0]: line.split() for line in monitor.file.getvalue().splitlines()[2:]}
    assert rows["strong.weight"][1:3] == ["12", "6"] and rows["strong.weight"][-1] == "ok"
    assert rows["faint.weight"][-3:] == ["vanishing", "(6", "steps)"]
    assert rows["global"][1:3] == ["12", "6"]
    assert "vanishing = gradient norm < 1e-07" in monitor.file.getvalue()
