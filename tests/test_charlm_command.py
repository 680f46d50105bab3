"""``trainkit train`` / ``evaluate`` on the character-level language model configs, in a subprocess as a user runs
them, on a short piece of their text so that each run takes seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
GPT_CONFIG = ROOT / "configs" / "charlm.yaml"
LSTM_CONFIG = ROOT / "configs" / "charlm_lstm.yaml"
TEXT = ROOT / "examples" / "charlm" / "shakespeare.txt"


def trainkit(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def short_text(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "short.txt"
    path.write_text(TEXT.read_text(encoding="utf-8")[:6000], encoding="utf-8")
    return path


SMALL = {  # a few seconds: a tiny model over 6000 characters
    GPT_CONFIG: ["model.init_args={n_layer: 1, n_head: 2, n_embd: 16}"],
    LSTM_CONFIG: ["model.init_args={embedding_dim: 8, hidden_size: 16}"],
}


def train_small(config: Path, text: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    sets = [
        f"output_dir={out}",
        "trainer.epochs=1",
        f"data.path={text}",
        "data.block_size=32",
        "callbacks=[{name: TextSample, prompt: 'ROMEO:', length: 30}]",
        *SMALL[config],
        *extra,
    ]
    return trainkit("train", config, *[arg for s in sets for arg in ("--set", s)])


@pytest.fixture(scope="module")
def gpt_run(short_text, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return train_small(GPT_CONFIG, short_text, out), out / "charlm" / "version_0"


def check_run(result: subprocess.CompletedProcess, run: Path, short_text: Path) -> None:
    assert result.returncode == 0, result.stderr
    assert "done: 1 epochs" in result.stdout and "val_perplexity" in result.stdout
    epoch_line = next(line for line in result.stdout.splitlines() if line.startswith("Epoch 1/1"))
    for key in ("loss", "perplexity", "val_loss", "val_perplexity"):
        assert f" {key}: " in epoch_line
    sample = result.stdout.split("--- sample after epoch 1: 'ROMEO:' ->\n")[1].split("\ndone:")[0]
    assert sample.startswith("ROMEO:") and len(sample) == len("ROMEO:") + 30
    for name in ("config.yaml", "vocab.json", "history.jsonl", "samples.txt", "checkpoints/last.npz"):
        assert (run / name).is_file(), name
    vocab = json.loads((run / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["level"] == "char" and set(vocab["tokens"]) <= set(short_text.read_text(encoding="utf-8"))
    row = json.loads((run / "history.jsonl").read_text().splitlines()[-1])
    assert abs(row["val_perplexity"] - 2.718281828 ** row["val_loss"]) < 1e-3 * row["val_perplexity"]


def check_evaluate(config: Path, run: Path, short_text: Path) -> None:
    result = trainkit(
        "evaluate",
        config,
        "--checkpoint",
        run / "checkpoints" / "last.npz",
        "--set",
        f"data.path={short_text}",
        "--set",
        "data.block_size=32",
        *SMALL_SETS[config],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("val (") and ", perplexity " in result.stdout
    history = json.loads((run / "history.jsonl").read_text().splitlines()[-1])
    shown = float(result.stdout.split(", perplexity ")[1].split(",")[0])
    assert abs(shown - history["val_perplexity"]) < 1e-3 * shown


SMALL_SETS = {config: [arg for s in sets for arg in ("--set", s)] for config, sets in SMALL.items()}


def test_gpt_config_trains_and_logs_perplexity(gpt_run, short_text):
    result, run = gpt_run
    check_run(result, run, short_text)


def test_gpt_evaluate_prints_perplexity(gpt_run, short_text):
    check_evaluate(GPT_CONFIG, gpt_run[1], short_text)


def test_evaluate_refuses_characters_the_run_never_saw(gpt_run, short_text, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text(short_text.read_text(encoding="utf-8") + "Ωμέγα\n", encoding="utf-8")
    result = trainkit(
        "evaluate",
        GPT_CONFIG,
        "--checkpoint",
        gpt_run[1] / "checkpoints" / "last.npz",
        "--set",
        f"data.path={other}",
        "--set",
        "data.block_size=32",
        *SMALL_SETS[GPT_CONFIG],
    )
    assert result.returncode == 2, result.stderr
    assert "'data.path'" in result.stderr and str(other) in result.stderr and "'Ω' (1 time)" in result.stderr
    assert str(gpt_run[1] / "vocab.json") in result.stderr


def test_lstm_config_trains_and_evaluates(short_text, tmp_path):
    result = train_small(LSTM_CONFIG, short_text, tmp_path)
    run = tmp_path / "charlm_lstm" / "version_0"
    check_run(result, run, short_text)
    check_evaluate(LSTM_CONFIG, run, short_text)


# the first two in a subprocess, as a user meets them; the others through the same entry point in this process
@pytest.mark.parametrize(
    "content, sets, key, message, subprocess_run",
    [
        (None, [], "data.path", "no such file", True),
        (b"\xff\xfe not utf-8", [], "data.path", "is not UTF-8 text: byte 0xff at offset 0", True),
        (b"", [], "data.path", "is empty", False),
        (b"too short", [], "data.block_size", "holds 9 characters, too few for one window of block_size 32", False),
        ("ok", ["data.block_size=0"], "data.block_size", "must be at least 1, got 0", False),
        ("ok", ["data.max_mb=0.000001"], "data.max_mb", "over the limit of 1e-06 MB", False),
        ("ok", ["loss=mse"], "loss", "is 'mse', but data.kind text gives next-token class ids", False),
    ],
)
def test_broken_inputs_exit_2_naming_the_key_and_the_file(
    tmp_path, short_text, capsys, content, sets, key, message, subprocess_run
):
    path = tmp_path / "bad.txt"
    if content == "ok":
        path.write_text(short_text.read_text(encoding="utf-8"), encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)
    args = [
        "train",
        GPT_CONFIG,
        "--set",
        f"output_dir={tmp_path / 'runs'}",
        "--set",
        f"data.path={path}",
        "--set",
        "data.block_size=32",
        *[a for s in sets for a in ("--set", s)],
    ]
    if subprocess_run:
        result = trainkit(*args)
        code, stderr = result.returncode, result.stderr
    else:
        code, stderr = main([str(a) for a in args]), capsys.readouterr().err
    assert code == 2, stderr
    assert stderr.startswith(f"trainkit: config error: {GPT_CONFIG}: '{key}'")
    assert message in stderr
    if content != "ok":
        assert str(path) in stderr
    assert not (tmp_path / "runs" / "charlm" / "version_0").exists()  # nothing left behind


# ------------------------------------------------------------------------------ the example models under PyTorch
def example_models(library: str):
    """examples/charlm/model.py run with ``library`` as ``torch``: the file is PyTorch code but for its imports."""
    source = (ROOT / "examples" / "charlm" / "model.py").read_text()
    if library == "torch":
        source = source.replace(
            "import trainkit as torch\nimport trainkit.nn.functional as F\nfrom trainkit import nn",
            "import torch\nimport torch.nn.functional as F\nfrom torch import nn",
        )
    namespace: dict = {"__name__": f"charlm_models_{library}"}
    exec(compile(source, f"model.py ({library})", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("GPT", {"vocab_size": 11, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16}),
        ("LSTMLanguageModel", {"vocab_size": 11, "block_size": 8, "embedding_dim": 6, "hidden_size": 10}),
    ],
)
def test_the_example_models_match_pytorch(torch, name, kwargs):
    import trainkit

    ours = example_models("trainkit")[name](**kwargs).double()
    theirs = example_models("torch")[name](**kwargs).double()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    if name == "GPT":  # the head shares the token embedding's weight, in both
        assert ours.head.weight is ours.tok_emb.weight and theirs.head.weight is theirs.tok_emb.weight
    ids = [[1, 4, 2, 9, 0, 3, 3, 7], [10, 5, 6, 2, 8, 1, 0, 4]]
    targets = [row[1:] + [5] for row in ids]
    logits = ours(trainkit.tensor(ids))
    expected = theirs(torch.tensor(ids))
    assert tuple(logits.shape) == (2, 8, 11)
    np.testing.assert_allclose(logits.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    loss = trainkit.nn.functional.cross_entropy(logits.reshape(-1, 11), trainkit.tensor(targets).reshape(-1))
    torch.nn.functional.cross_entropy(expected.reshape(-1, 11), torch.tensor(targets).reshape(-1)).backward()
    loss.backward()
    grads = dict(theirs.named_parameters())
    for key, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[key].grad.numpy(), rtol=1e-8, atol=1e-12, err_msg=key)
