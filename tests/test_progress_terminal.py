"""The training display as a user sees it: ``trainkit train`` on a real pseudo-terminal of a set width (a bar that
fits the window, then each epoch's complete summary wrapped rather than cut), through a pipe (one line per epoch,
no carriage return), and ``Trainer.fit(verbose=0/1/2/'auto')`` from Python on a terminal and off it."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import ProgressBar
from trainkit.callbacks.progress import check_verbose, resolve_verbose
from trainkit.callbacks.progress_line import LiveBar, bar_line, wrap_fields
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"
COLUMNS = 60
NUMBER = r"-?[0-9][0-9.e+-]*"


def open_terminal(columns: int, rows: int = 24) -> tuple[int, int]:
    """A pseudo-terminal (master, slave) whose window is ``columns`` wide."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return master, slave


def read_all(master: int, done, timeout: float = 120.0) -> bytes:
    """Everything written to the terminal until the writer is ``done()`` and nothing is left to read."""
    chunks = []
    waited = 0.0
    while waited < timeout:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            if done():
                break
            waited += 0.2
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the last writer closed its end
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def train_on_terminal(tmp_path: Path, columns: int, *sets: str) -> str:
    """``trainkit train`` with its stdout and stderr on a terminal ``columns`` wide; what the terminal got."""
    master, slave = open_terminal(columns)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    args = [sys.executable, "-m", "trainkit.cli", "train", str(CONFIG), "--set", f"output_dir={tmp_path}"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, env=env)
    os.close(slave)
    try:
        out = read_all(master, lambda: proc.poll() is not None)
        assert proc.wait(timeout=60) == 0, out.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return out.decode("utf-8").replace("\r\n", "\n")  # the terminal's own newline; a bare '\r' is a redraw


def train_through_pipe(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "trainkit.cli", "train", str(CONFIG), "--set", f"output_dir={tmp_path}"]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=300)


def screen(text: str) -> tuple[list[str], int]:
    """What a terminal shows after ``text`` (carriage returns overwrite, newlines advance), and the widest column
    anything was written to; the caller checks that against the window's width (past it a terminal wraps)."""
    lines, line, col, widest = [], [], 0, 0
    for ch in text:
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line += [" "] * (col - len(line)) + [ch]
            col += 1
            widest = max(widest, col)
    if line:
        lines.append("".join(line).rstrip())
    return lines, widest


def epoch_blocks(lines: list[str]) -> dict[str, list[str]]:
    """The lines under each ``Epoch N/M`` header, up to the next header or the first line of something else."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if re.fullmatch(r"Epoch \d+/\d+", line):
            current = blocks.setdefault(line, [])
        elif current is not None and (line.startswith("    ") or re.match(r"\s*\d+/(\d+|\?) ", line)):
            current.append(line)
        else:
            current = None
    return blocks


# ------------------------------------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def terminal_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tty")
    return train_on_terminal(tmp, COLUMNS, "trainer.epochs=3", "data.validation_split=0.2")


def test_on_a_terminal_each_epoch_ends_with_its_complete_summary_wrapped_to_the_window(terminal_run):
    lines, _ = screen(terminal_run)
    blocks = epoch_blocks(lines)
    assert list(blocks) == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"], lines
    for title, summary in blocks.items():
        assert len(summary) >= 2, (title, summary)  # too long for 60 columns: wrapped, not cut
        assert all(len(line) <= COLUMNS for line in summary), summary
        assert re.match(r"\s*8/8 ━+ \d+\.\ds \d+(us|ms|s)/step", summary[0]), summary[0]  # time, time per step
        text = " - ".join(line.strip() for line in summary)
        for key in ("loss", "mae", "val_loss", "val_mae"):
            assert re.search(rf"(^|- ){key}: {NUMBER}( -|$)", text), (key, text)
        assert re.search(r"(^|- )lr: 0\.2$", text), text  # the last field, whole


def test_on_a_terminal_the_bar_fits_the_window_and_shows_the_epoch_and_run_eta(terminal_run):
    _, widest = screen(terminal_run.split("Epoch 1/3")[1].split("parameter ")[0])  # the gradient table is wider
    assert widest <= COLUMNS
    assert "\r" in terminal_run  # redrawn in place
    first_epoch = terminal_run.split("Epoch 2/3")[0]
    assert re.search(r"8/8 ━+ ETA \d+\.\ds, run \d", first_epoch), first_epoch  # epoch's ETA and the whole run's
    assert "done: 3 epochs" in terminal_run


def test_a_narrow_terminal_gets_a_shorter_bar_and_every_field_still(tmp_path):
    out = train_on_terminal(tmp_path, 32, "trainer.epochs=2", "data.validation_split=0.2")
    lines, _ = screen(out.split("parameter ")[0])
    assert screen(out.split("Epoch 1/2")[1].split("parameter ")[0])[1] <= 32  # the bar and the summaries
    summary = epoch_blocks(lines)["Epoch 2/2"]
    text = " ".join(summary)
    assert all(key in text for key in ("loss: ", "val_loss: ", "val_mae: ", "lr: 0.2")), summary


def test_through_a_pipe_one_line_per_epoch_and_no_carriage_return(tmp_path):
    result = train_through_pipe(tmp_path, "trainer.epochs=3", "data.validation_split=0.2")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stdout and "\r" not in result.stderr
    epochs = [line for line in result.stdout.splitlines() if line.startswith("Epoch ")]
    assert len(epochs) == 3 and "done: 3 epochs" in result.stdout
    for n, line in enumerate(epochs, 1):
        assert re.fullmatch(
            rf"Epoch {n}/3 - \d+\.\ds - \d+(us|ms|s)/step - loss: {NUMBER} - mae: {NUMBER} - val_loss: {NUMBER}"
            rf" - val_mae: {NUMBER} - lr: 0\.2",
            line,
        ), line


def test_verbose_false_in_the_config_prints_no_epoch_lines(tmp_path):
    result = train_through_pipe(tmp_path, "trainer.epochs=2", "trainer.verbose=false")
    assert result.returncode == 0, result.stderr
    assert "Epoch" not in result.stdout and "\r" not in result.stdout and "done: 2 epochs" in result.stdout


def test_verbose_2_in_the_config_prints_one_line_per_epoch_on_a_terminal(tmp_path):
    out = train_on_terminal(tmp_path, COLUMNS, "trainer.epochs=3", "trainer.verbose=2", "data.validation_split=0.2")
    assert "\r" not in out
    epochs = [line for line in out.splitlines() if line.startswith("Epoch ")]
    assert [line.split(" - ")[0] for line in epochs] == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]
    assert all(" - val_loss: " in line and line.endswith(" - lr: 0.2") for line in epochs)  # whole: no bar cuts it


@pytest.mark.parametrize("value", ["0", "1", "auto"])
def test_verbose_in_the_config_through_a_pipe(tmp_path, value):
    result = train_through_pipe(tmp_path, "trainer.epochs=2", f"trainer.verbose={value}")
    assert result.returncode == 0, result.stderr
    epochs = [line for line in result.stdout.splitlines() if line.startswith("Epoch ")]
    assert "\r" not in result.stdout and len(epochs) == (0 if value == "0" else 2)
    assert "done: 2 epochs" in result.stdout


# ------------------------------------------------------------------------------------- Trainer.fit(verbose)
class Terminal:
    """sys.stdout on a pseudo-terminal ``columns`` wide, with a thread draining what it shows."""

    def __init__(self, columns: int = COLUMNS) -> None:
        self.master, slave = open_terminal(columns)
        self.stream = open(slave, "w", encoding="utf-8", buffering=1)
        self.finished = threading.Event()
        self.data = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        self.data = read_all(self.master, self.finished.is_set, timeout=60)

    def close(self) -> str:
        self.stream.flush()
        self.finished.set()
        self.reader.join(timeout=30)
        self.stream.close()
        os.close(self.master)
        return self.data.decode("utf-8").replace("\r\n", "\n")


def fit(monkeypatch, stdout, verbose, epochs=2, **trainer_kwargs):
    monkeypatch.setattr(sys, "stdout", stdout)
    trainkit.manual_seed(0)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    trainer = Trainer(nn.Linear(1, 1), metrics=["mae"], seed=0, **trainer_kwargs)
    trainer.fit(x, 2 * x, epochs=epochs, batch_size=5, validation_split=0.25, verbose=verbose)
    return trainer


@pytest.mark.parametrize("verbose", [1, "auto", True])
def test_fit_on_a_terminal_draws_the_bar(monkeypatch, verbose):
    term = Terminal()
    trainer = fit(monkeypatch, term.stream, verbose)
    text = term.close()
    lines, widest = screen(text)
    assert "\r" in text and widest <= COLUMNS
    assert list(epoch_blocks(lines)) == ["Epoch 1/2", "Epoch 2/2"]
    assert "val_mae: " in text and "lr: 0.01" in text
    assert trainer.callbacks.callbacks[-1].params["verbose"] == 1


def test_fit_verbose_2_on_a_terminal_prints_one_line_per_epoch(monkeypatch):
    term = Terminal()
    fit(monkeypatch, term.stream, 2, epochs=3)
    text = term.close()
    assert "\r" not in text
    epochs = [line for line in text.splitlines() if line.startswith("Epoch ")]
    assert [line.split(" - ")[0] for line in epochs] == ["Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]
    assert all("val_loss: " in line and line.endswith("lr: 0.01") for line in epochs)


@pytest.mark.parametrize("verbose, resolved", [(1, 1), (2, 2), ("auto", 2), (True, 2)])
def test_fit_off_a_terminal_never_writes_a_carriage_return(monkeypatch, verbose, resolved):
    out = io.StringIO()
    trainer = fit(monkeypatch, out, verbose)
    assert "\r" not in out.getvalue()
    epochs = [line for line in out.getvalue().splitlines() if line.startswith("Epoch ")]
    assert len(epochs) == 2 and all("ms/step - loss: " in line or "us/step - loss: " in line for line in epochs)
    assert trainer.callbacks.callbacks[-1].params["verbose"] == resolved


@pytest.mark.parametrize("verbose", [0, False])
def test_fit_verbose_0_prints_nothing_even_on_a_terminal(monkeypatch, verbose):
    term = Terminal()
    fit(monkeypatch, term.stream, verbose)
    assert term.close() == ""


def test_the_trainers_verbose_is_the_default_of_fit(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    trainer = Trainer(nn.Linear(1, 1), verbose=0)
    trainer.fit(trainkit.zeros(4, 1), trainkit.zeros(4, 1), epochs=1)
    assert out.getvalue() == ""
    trainer.fit(trainkit.zeros(4, 1), trainkit.zeros(4, 1), epochs=1, verbose=2)
    assert out.getvalue().startswith("Trainable params") and "Epoch 1/1 - " in out.getvalue()


@pytest.mark.parametrize("bad", [3, -1, "yes", 1.0])
def test_a_bad_verbose_is_named(bad):
    message = f"verbose must be 0 (silent), 1 (a progress bar), 2 (one line per epoch) or 'auto', got {bad!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        Trainer(nn.Linear(1, 1), verbose=bad)
    with pytest.raises(ValueError, match=re.escape(message)):
        Trainer(nn.Linear(1, 1), verbose=0).fit(trainkit.zeros(4, 1), trainkit.zeros(4, 1), verbose=bad)


def test_auto_follows_the_stream():
    master, slave = open_terminal(40)
    with open(slave, "w", closefd=True) as tty:
        assert resolve_verbose("auto", tty) == 1 and resolve_verbose("AUTO", io.StringIO()) == 2
    os.close(master)
    assert [check_verbose(v) for v in (0, 1, 2, True, False)] == [0, 1, 2, "auto", 0]


# ------------------------------------------------------------------------------------------------ the layout
@pytest.mark.parametrize("width", [12, 20, 33, 60, 80, 200])
def test_the_live_line_never_exceeds_the_width(width):
    for current, total in [(0, 10), (7, 10), (10, 10), (99, 1000), (5, None)]:
        for info in ("ETA ?", "ETA 1m05s, run 2h03m", "validating"):
            line = bar_line(current, total, info, ["loss: 0.1234", "12ms/step"], width)
            assert len(line) <= width, (width, line)
            assert line.lstrip().startswith(f"{current}/"), line  # the count always shows


def test_the_summary_wraps_at_fields_and_keeps_each_whole():
    fields = [f"val_metric_{i}: 0.{i}2345" for i in range(8)]
    lines = wrap_fields(["10/10 ━━━━ 1.2s 3ms/step", *fields], 40)
    assert all(len(line) <= 40 for line in lines) and len(lines) > 2
    assert " - ".join(line.strip() for line in lines).split(" - ")[1:] == fields


def test_an_epoch_of_unknown_length_counts_without_a_bar():
    term = Terminal()
    bar = ProgressBar(file=term.stream)
    bar.set_params({"epochs": 1, "steps_per_epoch": None, "verbose": 1})  # a loader without a length
    bar.on_train_begin({})
    bar.on_epoch_begin(0)
    for batch in range(3):
        bar.on_train_batch_end(batch, {"loss": 0.5})
    bar.on_epoch_end(0, {"loss": 0.5, "lr": 0.1})
    text = term.close()
    lines, widest = screen(text)
    assert widest <= COLUMNS and "ETA ?" in text
    assert epoch_blocks(lines)["Epoch 1/1"] == [lines[-1]] and re.fullmatch(
        r"3/\? \d+\.\ds \d+(us|ms|s)/step - loss: 0\.5 - lr: 0\.1", lines[-1]
    )


def test_a_message_written_through_the_bar_appears_above_it():
    out = io.StringIO()
    bar = LiveBar(out, total=4, desc="Epoch 1/1", width=40)
    bar.draw(2, "ETA 1.0s", ["loss: 0.5"], force=True)
    bar.write("a sample")
    bar.finish("0.1s 2ms/step", ["loss: 0.25"])
    lines, _ = screen(out.getvalue())
    assert lines[0] == "a sample" and lines[1].startswith("2/4 ") and lines[-1].endswith("loss: 0.25")


def test_an_interrupted_epoch_leaves_its_bar_on_its_own_line():
    out = io.StringIO()
    out.isatty = lambda: True
    bar = ProgressBar(file=out)
    bar.set_params({"epochs": 2, "steps_per_epoch": 5, "verbose": 1})
    bar.on_train_begin({})
    bar.on_epoch_begin(0)
    bar.on_train_batch_end(0, {"loss": 1.0})
    bar.on_exception(KeyboardInterrupt())
    assert out.getvalue().endswith("\n") and bar.bar is None


def test_the_run_eta_counts_the_epochs_to_come_at_the_finished_ones_pace(monkeypatch):
    now = {"t": 0.0}

    def tick() -> float:
        return now["t"]

    monkeypatch.setattr("trainkit.callbacks.progress.time.perf_counter", tick)
    monkeypatch.setattr("trainkit.callbacks.progress_line.time.perf_counter", tick)
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    out.isatty = lambda: True
    bar = ProgressBar(file=out)
    bar.set_params({"epochs": 3, "steps_per_epoch": 4, "verbose": 1})
    bar.on_train_begin({})
    bar.on_epoch_begin(0)
    for batch in range(4):  # 1 s a batch
        now["t"] = batch + 1.0
        bar.on_train_batch_end(batch, {"loss": 1.0})
        if batch == 0:  # 3 batches left; the next two epochs at this one's pace, 4 s each
            assert out.getvalue().split("\r")[-1].startswith("1/4 ━━━━━─────────────── ETA 3.0s, run 11s")
    now["t"] = 8.0  # 4 s of validation
    bar.on_epoch_end(0, {"loss": 1.0})
    bar.on_epoch_begin(1)
    now["t"] = 9.0
    bar.on_train_batch_end(0, {"loss": 1.0})
    # 3 s of batches and 4 s of validation left in this epoch, then one epoch of 8 s
    assert out.getvalue().split("\r")[-1] == "1/4 ━━━━━─────────────── ETA 3.0s, run 15s - loss: 1 - 1s/step"


# ------------------------------------------------------------------------------------------ evaluate / predict
def trained(monkeypatch, stdout, **trainer_kwargs) -> Trainer:
    monkeypatch.setattr(sys, "stdout", stdout)
    trainkit.manual_seed(0)
    return Trainer(nn.Linear(1, 1), metrics=["mae"], seed=0, **trainer_kwargs)


def test_evaluate_and_predict_show_a_bar_then_their_summary_on_a_terminal(monkeypatch):
    term = Terminal()
    trainer = trained(monkeypatch, term.stream)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    logs = trainer.evaluate(x, 2 * x, batch_size=5)
    assert trainer.predict(x, batch_size=5).shape == (40, 1)
    text = term.close()
    lines, widest = screen(text)
    assert "\r" in text and widest <= COLUMNS
    evaluated = " ".join(line.strip() for line in lines[:-1])
    assert re.match(r"8/8 ━+ \d+\.\ds \d+(us|ms|s)/step - loss: ", evaluated), lines
    assert f"loss: {logs['loss']:.4g}" in evaluated and f"mae: {logs['mae']:.4g}" in evaluated
    assert re.fullmatch(r"8/8 ━+ \d+\.\ds \d+(us|ms|s)/step", lines[-1]), lines


def test_evaluate_and_predict_print_one_line_each_off_a_terminal(monkeypatch):
    out = io.StringIO()
    trainer = trained(monkeypatch, out)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    logs = trainer.evaluate(x, 2 * x, batch_size=5, verbose="auto")
    trainer.predict(x, batch_size=5)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 2
    assert re.fullmatch(rf"8/8 - \d+\.\ds - \d+(us|ms|s)/step - loss: {NUMBER} - mae: {NUMBER}", lines[0])
    assert f"loss: {logs['loss']:.4g} - mae: {logs['mae']:.4g}" in lines[0]
    assert re.fullmatch(r"8/8 - \d+\.\ds - \d+(us|ms|s)/step", lines[1])


def test_evaluate_and_predict_are_silent_with_verbose_0_and_inside_fit(monkeypatch):
    out = io.StringIO()
    trainer = trained(monkeypatch, out, verbose=False)
    x = trainkit.linspace(-1, 1, 40).unsqueeze(1)
    trainer.evaluate(x, 2 * x)
    trainer.predict(x)
    assert out.getvalue() == ""
    Trainer(nn.Linear(1, 1)).evaluate(x, 2 * x, verbose=0)
    assert out.getvalue() == ""
    trainer.fit(x, 2 * x, epochs=2, batch_size=5, validation_split=0.25, verbose=2)  # validation: no line of its own
    assert [line.split(" - ")[0] for line in out.getvalue().splitlines()[1:]] == ["Epoch 1/2", "Epoch 2/2"]
    with pytest.raises(ValueError, match="verbose must be 0"):
        trainer.predict(x, verbose="loud")
