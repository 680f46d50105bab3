"""Per-epoch cost of a long run: the tutorial regression config trained for many epochs with its run folder.

Builds the run as ``trainkit train configs/regression.yaml`` does (CSVLogger, ModelCheckpoint, the config's
GradientMonitor, last.npz every epoch) in a temporary output folder, times every epoch (from one epoch's start to
the next one's, so the checkpoint written after an epoch counts), and prints the mean ms per epoch over a window
around epoch 100 and around the last epoch. A cost that grows with the epoch count shows as a last figure far
above the first.

    python benchmarks/long_run.py [--epochs 5000] [--window 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from trainkit.callbacks.base import Callback
from trainkit.cli import config as cfg
from trainkit.cli.run import build

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "regression.yaml"


class EpochClock(Callback):
    """The wall time at the start of every epoch, and at the end of training."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.starts.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())


def epoch_times(epochs: int, output_dir: str) -> list[float]:
    """Seconds each epoch took, checkpoint and logs included (the last epoch's without its checkpoint)."""
    config = cfg.load(CONFIG, [f"output_dir={output_dir}", f"trainer.epochs={epochs}", "trainer.verbose=false"])
    run = build(config)
    clock = EpochClock()
    run.trainer.callbacks.append(clock)
    clock.set_trainer(run.trainer)
    run.trainer.fit(run.dataset, **run.fit_args)
    return [b - a for a, b in zip(clock.starts, clock.starts[1:])]


def ms_around(times: list[float], epoch: int, window: int) -> float:
    """Mean ms per epoch over ``window`` epochs ending at ``epoch`` (1-based)."""
    chunk = times[max(0, epoch - window) : epoch]
    return 1000 * statistics.fmean(chunk)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5000)
    parser.add_argument("--window", type=int, default=20, help="epochs averaged at each point")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        times = epoch_times(args.epochs, out)
        total = time.perf_counter() - start
        sizes = {p.name: p.stat().st_size for p in Path(out).rglob("*.npz")}
    first = min(100, args.epochs)
    print(
        f"epoch {first}: {ms_around(times, first, args.window):.2f} ms/epoch; "
        f"epoch {args.epochs}: {ms_around(times, args.epochs, args.window):.2f} ms/epoch; "
        f"total {total:.1f} s; checkpoints {', '.join(f'{k} {v / 1024:.0f} KiB' for k, v in sorted(sizes.items()))}"
    )


if __name__ == "__main__":
    main()
