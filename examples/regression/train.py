"""Train the tutorial regression from Python, with gradient monitoring and a callback of our own.

    python examples/regression/train.py

The same run as ``trainkit train configs/regression.yaml``, written out: the model is a Module subclass
(model.py), the Trainer does the loop, and callbacks watch the gradients through tensor hooks (GradientMonitor)
and through ``retain_grad`` on a layer's output (ActivationGradientMonitor).
"""

from __future__ import annotations

import sys
from pathlib import Path

import trainkit
from trainkit import nn, optim
from trainkit.callbacks import ActivationGradientMonitor, Callback, GradientMonitor
from trainkit.data import regression_curve
from trainkit.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from model import Net  # noqa: E402


class PrintEvery(Callback):
    """Print the loss and the global gradient norm every ``every`` epochs."""

    def __init__(self, every: int = 50):
        super().__init__()
        self.every = every

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every == 0:
            norm = logs.get("grad_norm/global", float("nan"))
            print(f"epoch {epoch + 1:4d}  loss {logs['loss']:.5f}  grad norm {norm:.4f}")


def main() -> dict:
    trainkit.manual_seed(0)
    model = Net(n_feature=1, n_hidden=10, n_output=1)
    trainer = Trainer(
        model,
        optimizer=optim.SGD(model.parameters(), lr=0.2),
        loss=nn.MSELoss(),
        metrics=["mae"],
        callbacks=[GradientMonitor(log_every=10), ActivationGradientMonitor(layers=["hidden"]), PrintEvery(50)],
        seed=0,
    )
    history = trainer.fit(regression_curve(100, noise=0.05, seed=0), epochs=200, batch_size=10)
    print("final train MSE:", round(history.history["loss"][-1], 5))
    print("prediction at x = 0.5:", trainer.predict(trainkit.tensor([[0.5]])).item(), "(true curve: 0.25)")
    return history.history


if __name__ == "__main__":
    main()
