"""Public PyTorch programs, unmodified (tests/real_programs, docs/real-programs.md), run by ``trainkit run-torch`` in
a subprocess in a temporary folder, made small by their own command-line options. Where the program seeds its
generator, trainkit draws torch's numbers, so the losses it prints are the figures torch 2.13 printed for the same
command (recorded below); the unseeded one must reach its own stopping criterion."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trainkit

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "real_programs"
SHAKESPEARE = PROGRAMS / "tinyshakespeare" / "input.txt"


def copy_program(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    shutil.copytree(PROGRAMS / name, folder)
    return folder


def run_torch(script: str, *args, cwd: Path, env: dict | None = None) -> str:
    """``trainkit run-torch SCRIPT ARGS`` in ``cwd``; its output (it must exit 0)."""
    environment = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "MPLBACKEND": "Agg"}
    environment.update(env or {})
    if "PYTHONPATH" in (env or {}):
        environment["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "run-torch", script, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=environment,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def numbers(pattern: str, text: str) -> list[float]:
    return [float(m) for m in re.findall(pattern, text)]


def test_regression_reaches_its_stopping_loss(tmp_path):
    """pytorch/examples regression/main.py: unseeded, it trains until the smooth-L1 loss is below 1e-3."""
    out = run_torch("main.py", cwd=copy_program("regression", tmp_path))
    loss, batches = re.search(r"Loss: ([\d.]+) after (\d+) batches", out).groups()
    assert float(loss) < 1e-3 and int(batches) > 1
    learned = numbers(r"[+-]\d+\.\d+", out.split("Learned function:")[1].split("\n")[0])
    actual = numbers(r"[+-]\d+\.\d+", out.split("Actual function:")[1].split("\n")[0])
    np.testing.assert_allclose(learned, actual, atol=0.2)


def test_time_sequence_prediction_lbfgs_matches_torch(tmp_path):
    """pytorch/examples time_sequence_prediction/train.py: two LSTMCells in float64 trained by LBFGS. The sine
    data is made as its generate_sine_wave.py makes it, smaller (6 waves of 100 steps); torch.load needs
    weights_only=False for a NumPy array, which torch's TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD gives."""
    pytest.importorskip("matplotlib")
    folder = copy_program("time_sequence_prediction", tmp_path)
    np.random.seed(2)
    period, length, count = 20, 100, 6
    x = np.empty((count, length), "int64")
    x[:] = np.array(range(length)) + np.random.randint(-4 * period, 4 * period, count).reshape(count, 1)
    trainkit.save(np.sin(x / 1.0 / period).astype("float64"), folder / "traindata.pt")
    out = run_torch("train.py", "--steps", 1, cwd=folder, env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    losses = [float(m) for m in re.findall(r"^loss: ([\d.e-]+)$", out, re.MULTILINE)]
    assert losses[0] == pytest.approx(0.5109785939429539, rel=1e-12)  # torch's first loss, same seed
    assert losses[-1] < losses[0] / 10
    assert numbers(r"test loss: ([\d.e-]+)", out) == [pytest.approx(0.003245778637618016, rel=1e-6)]
    assert (folder / "predict0.pdf").stat().st_size > 0


@pytest.mark.parametrize(
    ("model", "lr", "valid", "test"),
    [("LSTM", 20, [3.52, 3.47], 3.45), ("Transformer", 5, [2.21, 1.30], 1.33)],
)
def test_word_language_model_matches_torch(tmp_path, model, lr, valid, test):
    """pytorch/examples word_language_model/main.py on a tiny corpus in its data layout (data/tiny): the
    validation and test losses torch printed for the same command."""
    args = ["--data", "data/tiny", "--model", model, "--emsize", 32, "--nhid", 32, "--epochs", 2, "--bptt", 20]
    out = run_torch(
        "main.py", *args, "--log-interval", 5, "--lr", lr, cwd=copy_program("word_language_model", tmp_path)
    )
    assert numbers(r"valid loss +([\d.]+)", out) == valid
    assert numbers(r"test loss +([\d.]+)", out) == [test]


def test_mingpt_adder_matches_torch(tmp_path):
    """karpathy/minGPT projects/adder: a GPT learning one-digit addition, minGPT's Trainer and its infinite
    RandomSampler (num_samples=1e10)."""
    folder = copy_program("mingpt", tmp_path)
    args = ["--data.ndigit=1", "--trainer.max_iters=31", "--trainer.batch_size=32", "--trainer.num_workers=0"]
    out = run_torch(
        "projects/adder/adder.py", *args, "--trainer.device=cpu", cwd=folder, env={"PYTHONPATH": str(folder)}
    )
    assert numbers(r"train loss ([\d.]+)", out) == [2.23766, 1.95946, 1.79839, 1.65061]
    assert "train final score: 3/80 = 3.75% correct" in out and "test final score: 0/20" in out
    assert (folder / "out" / "adder" / "model.pt").is_file()


def test_mingpt_chargpt_matches_torch(tmp_path):
    """karpathy/minGPT projects/chargpt: a character GPT on 20 kB of Shakespeare, sampling 500 characters at
    iteration 0."""
    folder = copy_program("mingpt", tmp_path)
    shutil.copy(SHAKESPEARE, folder / "input.txt")
    args = ["--model.model_type=gpt-nano", "--data.block_size=32", "--trainer.max_iters=21"]
    args += ["--trainer.batch_size=16", "--trainer.num_workers=0", "--trainer.device=cpu"]
    out = run_torch("projects/chargpt/chargpt.py", *args, cwd=folder, env={"PYTHONPATH": str(folder)})
    assert numbers(r"train loss ([\d.]+)", out) == [4.08053, 3.76715, 3.57373]
    assert "O God, O God!" in out


def test_nanogpt_matches_torch(tmp_path):
    """karpathy/nanoGPT train.py with config/train_shakespeare_char.py and overrides for a 2-layer model on the
    CPU, on data prepared as data/shakespeare_char/prepare.py prepares it (without its download)."""
    folder = copy_program("nanogpt", tmp_path)
    data = folder / "data" / "shakespeare_char"
    text = SHAKESPEARE.read_text()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = [stoi[c] for c in text]
    split = int(len(ids) * 0.9)
    np.array(ids[:split], dtype=np.uint16).tofile(data / "train.bin")
    np.array(ids[split:], dtype=np.uint16).tofile(data / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    (data / "meta.pkl").write_bytes(pickle.dumps(meta))
    args = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=5"]
    args += ["--log_interval=5", "--block_size=32", "--batch_size=8", "--n_layer=2", "--n_head=2", "--n_embd=32"]
    args += ["--max_iters=40", "--lr_decay_iters=40", "--dropout=0.0", "--eval_interval=20", "--dtype=float32"]
    out = run_torch("train.py", *args, cwd=folder)
    assert numbers(r"iter 40: loss ([\d.]+)", out) == [3.8153]
    last_eval = re.search(r"step 40: train loss ([\d.]+), val loss ([\d.]+)", out).groups()
    assert [float(v) for v in last_eval] == [3.8331, 3.8327]
    assert (folder / "out-shakespeare-char" / "ckpt.pt").is_file()


@pytest.mark.parametrize(
    ("kind", "losses"),
    [("transformer", [3.5339, 3.2891, 3.1069, 3.0870, 2.9282]), ("rnn", [None, None, 3.2097])],
)
def test_makemore_matches_torch(tmp_path, kind, losses):
    """karpathy/makemore on its names.txt: a small transformer and the RNN, with its TensorBoard writer."""
    pytest.importorskip("tensorboardX")
    steps = 10 * (len(losses) - 1) + 1
    args = ["--type", kind, "--max-steps", steps, "--num-workers", 0, "--n-layer", 2, "--n-embd", 32]
    out = run_torch("makemore.py", *args, "--n-embd2", 32, "--batch-size", 16, cwd=copy_program("makemore", tmp_path))
    printed = numbers(r"\| loss ([\d.]+)", out)
    assert len(printed) == len(losses)
    assert [a for a, b in zip(printed, losses) if b is not None] == [b for b in losses if b is not None]
    assert printed[-1] < printed[0]


def test_ng_video_lecture_bigram_matches_torch(tmp_path):
    """karpathy/ng-video-lecture bigram.py (its hyperparameters are constants: 3000 steps of batch 32): the
    losses torch printed, and the same sampled text (multinomial draws torch's numbers)."""
    folder = copy_program("ng-video-lecture", tmp_path)
    shutil.copy(SHAKESPEARE, folder / "input.txt")
    out = run_torch("bigram.py", cwd=folder)
    assert numbers(r"train loss ([\d.]+)", out) == [
        4.5822,
        2.7314,
        2.4595,
        2.4161,
        2.3980,
        2.3880,
        2.3832,
        2.3741,
        2.3800,
        2.3853,
    ]
    assert numbers(r"val loss ([\d.]+)", out) == [
        4.6054,
        2.8027,
        2.5261,
        2.4999,
        2.4829,
        2.4778,
        2.4742,
        2.4828,
        2.4831,
        2.4721,
    ]
    assert "Mase y, what rsh ive s fodinsh iOu" in out
