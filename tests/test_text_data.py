"""The text data kind: tokens, vocabulary, next-token windows, the split by position, its refusals; perplexity, the
token-flattened loss and the TextSample callback."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.callbacks import ProgressBar, TextSample
from trainkit.cli.config import ConfigError
from trainkit.cli.config import load as load_config
from trainkit.cli.run import TokenLoss, build
from trainkit.data import DataLoader, Subset, TextDataError, TextDataset, Vocabulary, load_text, vocabulary_of
from trainkit.data.text import layout, tokenize
from trainkit.metrics import Perplexity, get_metric
from trainkit.registry import DATA_KINDS

ROOT = Path(__file__).resolve().parents[1]
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 6


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- tokens, vocabulary
def test_tokens_and_vocabulary_round_trip(tmp_path):
    assert tokenize("a b\nc", "char") == ["a", " ", "b", "\n", "c"]
    assert tokenize("  to be,\n or  ", "word") == ["to", "be,", "or"]
    vocab = Vocabulary.build("hello world")
    assert vocab.tokens == sorted(set("hello world")) and vocab.level == "char"
    ids = vocab.encode("low ")
    assert ids.dtype == np.int64 and vocab.decode(ids) == "low " and vocab.decode(trainkit.tensor(ids)) == "low "
    saved = Vocabulary.load(vocab.save(tmp_path / "vocab.json"))
    assert saved.tokens == vocab.tokens and saved.level == "char"
    words = Vocabulary.build("to be or not to be", "word")
    assert words.tokens[0] == "<unk>" and words.decode(words.encode("to be or else")) == "to be or <unk>"


def test_unknown_characters_are_named():
    vocab = Vocabulary.build("abc")
    with pytest.raises(ValueError, match=r"'z' \(2 times\), 'é' \(1 time\) are not in the vocabulary of 3 characters"):
        vocab.encode("abzzé")


def test_non_ascii_characters_encode():
    vocab = Vocabulary.build("naïve café ☃")
    assert vocab.decode(vocab.encode("☃ café")) == "☃ café"


# ------------------------------------------------------------------------------------------------- windows
def test_windows_are_next_token_pairs(text_file):
    ds = load_text(text_file, block_size=8)
    assert isinstance(ds, TextDataset) and ds.vocab_size == len(set(TEXT))
    ids = ds.vocabulary.encode(TEXT)
    assert len(ds) == (len(TEXT) - 9) // 8 + 1
    for i in (0, 1, len(ds) - 1):
        x, y = ds[i]
        s = 8 * i
        assert x.dtype == trainkit.int64 and tuple(x.shape) == (8,)
        assert x.tolist() == ids[s : s + 8].tolist() and y.tolist() == ids[s + 1 : s + 9].tolist()
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert tuple(x.shape) == (4, 8) and tuple(y.shape) == (4, 8)


def test_stride(text_file):
    ds = load_text(text_file, block_size=8, stride=3)
    assert ds.starts[:4].tolist() == [0, 3, 6, 9] and len(ds) == (len(TEXT) - 9) // 3 + 1


@pytest.mark.parametrize(
    "length, block, stride, val, test",
    [
        (1000, 16, 16, 0.1, 0.0),
        (1000, 16, 5, 0.2, 0.1),
        (97, 8, 8, 0.3, 0.0),
        (5000, 64, 64, 0.1, 0.1),
        (300, 10, 1, 0.5, 0.0),
        (40, 4, 4, 0.0, 0.0),
    ],
)
def test_layout_splits_by_position_as_the_trainer_counts(length, block, stride, val, test):
    starts, train_end = layout(length, block, stride, val, test)
    n = len(starts)
    n_test = int(n * test)
    n_val = int((n - n_test) * val)  # what run.build and Trainer.fit(validation_split=...) take from the end
    parts = [starts[: n - n_test - n_val], starts[n - n_test - n_val : n - n_test], starts[n - n_test :]]
    assert parts[0] and all(s + block + 1 <= length for s in starts)
    assert max(parts[0]) + block + 1 <= train_end  # no training window, targets included, reaches past its part
    for before, after in zip(parts, parts[1:]):
        if before and after:
            assert max(before) + block + 1 <= min(after)
    if n_val:
        assert min(parts[1]) == train_end
    assert all(b - a == stride for part in parts for a, b in zip(part, part[1:]))


def test_vocabulary_comes_from_the_training_part(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("ab" * 100 + "ba" * 20 + "ab" * 30, encoding="utf-8")
    ds = load_text(path, block_size=4, validation_split=0.1)
    assert ds.vocabulary.tokens == ["a", "b"]
    path.write_text("ab" * 100 + "xyz" * 10 + "b", encoding="utf-8")
    with pytest.warns(
        UserWarning,
        match=r"held-out part holds 3 characters that the training part lacks \('x', 'y', "
        r"'z'\); added to the vocabulary, never seen in training",
    ):
        ds = load_text(path, block_size=4, validation_split=0.2)
    assert ds.vocabulary.tokens == ["a", "b", "x", "y", "z"]  # the training part's first


def test_word_level_maps_unseen_words_to_unk(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text(" ".join(["the cat sat on the mat"] * 20 + ["a dog barked"] * 3), encoding="utf-8")
    ds = load_text(path, block_size=5, level="word", validation_split=0.1)
    vocab = ds.vocabulary
    assert vocab.tokens[0] == "<unk>" and "dog" not in vocab.tokens
    val = Subset(ds, range(len(ds) - int(len(ds) * 0.1), len(ds)))
    assert 0 in np.concatenate([val[i][1].numpy() for i in range(len(val))])


def test_a_saved_vocabulary_is_used_and_checked(text_file, tmp_path):
    vocab = load_text(text_file, block_size=8).vocabulary
    saved = vocab.save(tmp_path / "vocab.json")
    assert load_text(text_file, block_size=8, vocabulary=saved).vocabulary.tokens == vocab.tokens
    other = tmp_path / "other.txt"
    other.write_text(TEXT + "Zounds", encoding="utf-8")
    with pytest.raises(TextDataError, match=rf"'Z' \(1 time\) is not in the vocabulary {saved}"):
        load_text(other, block_size=8, vocabulary=saved)
    with pytest.raises(TextDataError, match="is 'word', but .* is a char-level vocabulary"):
        load_text(text_file, block_size=8, level="word", vocabulary=saved)


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    "content, kwargs, key, message",
    [
        (None, {}, "path", "no such file"),
        (b"caf\xe9 au lait", {}, "path", r"not UTF-8 text: byte 0xe9 at offset 3"),
        (b"", {}, "path", "is empty"),
        (b"  \n\n ", {}, "path", "holds only whitespace"),
        (
            b"short text",
            {"block_size": 64},
            "block_size",
            "holds 10 characters, too few for one window of block_size 64",
        ),
        (b"one two three", {"block_size": 3, "level": "word"}, "block_size", "holds 3 words"),
        (b"abcdefghij" * 3, {"block_size": 0}, "block_size", "at least 1, got 0"),
        (b"abcdefghij" * 3, {"stride": 0}, "stride", "at least 1, got 0"),
        (b"abcdefghij" * 3, {"level": "byte"}, "level", "char, word, got .byte."),
        (b"abcdefghij" * 3, {"max_mb": 1e-5}, "max_mb", r"0.0 MB, over the limit of 1e-05 MB"),
    ],
)
def test_refusals_name_the_key_and_the_file(tmp_path, content, kwargs, key, message):
    path = tmp_path / "bad.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TextDataError, match=message) as err:
        load_text(path, **kwargs)
    assert err.value.key == key
    if content and "got" not in message:
        assert str(path) in str(err.value)


def test_a_byte_order_mark_is_not_a_character(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffabcabcabcabc".encode())
    assert load_text(path, block_size=4).vocabulary.tokens == ["a", "b", "c"]


# ----------------------------------------------------------------------------------------- config and build
def write_config(tmp_path: Path, text_file: Path, extra: str = "") -> Path:
    model = ROOT / "examples" / "charlm" / "model.py"
    config = tmp_path / "lm.yaml"
    config.write_text(
        f"model: {{class_path: '{model}:LSTMLanguageModel'}}\n"
        f"data: {{kind: text, path: {text_file.name}, block_size: 8, validation_split: 0.2}}\n"
        f"loss: cross_entropy\nmetrics: [perplexity]\ntrainer: {{verbose: false}}\n{extra}"
    )
    return config


def test_the_text_kind_from_a_config(tmp_path, text_file):
    config = load_config(write_config(tmp_path, text_file))
    assert "text" in DATA_KINDS and config.data.level == "char" and config.data.stride is None
    dataset = DATA_KINDS.get("text")(dataclasses.asdict(config.data), tmp_path)
    assert isinstance(dataset, TextDataset) and dataset.block_size == 8
    with pytest.raises(ConfigError, match=r"'data.block_size' must be at least 1, got 0"):
        load_config(write_config(tmp_path, text_file), ["data.block_size=0"])
    with pytest.raises(ConfigError, match=r"'data.path' is required for data.kind text"):
        load_config(write_config(tmp_path, text_file), ["data.path=null"])


def test_build_fills_the_models_vocabulary_and_block_size(tmp_path, text_file):
    run = build(load_config(write_config(tmp_path, text_file)))
    assert run.trainer.model.block_size == 8
    assert run.trainer.model.head.out_features == len(set(TEXT)) == len(vocabulary_of(run.dataset))
    assert isinstance(run.trainer.loss_fn, TokenLoss)
    with pytest.raises(ConfigError, match=r"'model.init_args.vocab_size' is 3, but the vocabulary of t.txt holds"):
        build(load_config(write_config(tmp_path, text_file), ["model.init_args={vocab_size: 3}"]))


def test_build_names_the_key_and_the_config(tmp_path, text_file):
    text_file.write_bytes(b"\xff\xfe abc")
    with pytest.raises(ConfigError, match=rf"lm.yaml: 'data.path': {text_file} is not UTF-8 text"):
        build(load_config(write_config(tmp_path, text_file)))


# ----------------------------------------------------------------------------------------- loss, perplexity
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_perplexity_and_token_loss_match_torch(torch, dtype):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 7)).astype(dtype)
    targets = rng.integers(0, 7, size=(3, 5))
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits).reshape(-1, 7), torch.tensor(targets).reshape(-1))
    loss = TokenLoss(nn.CrossEntropyLoss())(trainkit.tensor(logits), trainkit.tensor(targets))
    assert loss.dtype == getattr(trainkit, dtype)
    assert math.isclose(loss.item(), expected.item(), rel_tol=1e-6)
    metric = get_metric("perplexity")
    assert isinstance(metric, Perplexity)
    metric.update(trainkit.tensor(logits[:2]), trainkit.tensor(targets[:2]))
    metric.update(trainkit.tensor(logits[2:]), trainkit.tensor(targets[2:]))
    assert math.isclose(metric.compute(), math.exp(expected.item()), rel_tol=1e-6)
    layout_nvt = Perplexity()  # torch's (N, V, T) layout gives the same figure
    layout_nvt.update(trainkit.tensor(logits.transpose(0, 2, 1).copy()), trainkit.tensor(targets))
    assert math.isclose(layout_nvt.compute(), math.exp(expected.item()), rel_tol=1e-6)
    flat = Perplexity()
    flat.update(trainkit.tensor(logits.reshape(-1, 7)), trainkit.tensor(targets.reshape(-1)))
    assert math.isclose(flat.compute(), math.exp(expected.item()), rel_tol=1e-6)
    with pytest.raises(ValueError, match=r"perplexity: logits of shape \(3, 5, 7\) do not fit targets of shape \(3,"):
        Perplexity().update(trainkit.tensor(logits), trainkit.tensor(targets[:, 0]))


# ------------------------------------------------------------------------------------------------ TextSample
class Bigram(nn.Module):
    """Logits of the next token from the current one alone; drops out, to show that sampling runs in eval mode."""

    def __init__(self, vocab_size: int, check_eval: bool = True):
        super().__init__()
        self.check_eval = check_eval
        self.block_size = 4
        self.table = nn.Embedding(vocab_size, vocab_size)
        self.drop = nn.Dropout(0.5)
        self.contexts: list[int] = []

    def forward(self, idx):
        self.contexts.append(idx.shape[1])
        assert not self.check_eval or (not self.training and not trainkit.is_grad_enabled())
        return self.drop(self.table(idx))


def test_text_sample_prints_a_continuation_and_restores_the_mode(tmp_path):
    vocab = Vocabulary.build("abcdefgh ")
    model = Bigram(len(vocab))
    model.train()
    model.drop.eval()  # one sub-module in eval before: it stays so
    out = io.StringIO()
    cb = TextSample(prompt="abc", length=12, temperature=0.5, top_k=3, every=2, seed=1, vocabulary=vocab, file=out)
    cb.set_model(model)
    cb.set_run_dir(tmp_path)
    cb.on_train_begin()
    cb.on_epoch_end(0, {})
    cb.on_epoch_begin(1, {})
    assert out.getvalue() == ""  # every=2: not after the first epoch
    cb.on_epoch_end(1, {})
    assert out.getvalue() == ""  # shown once the epoch is recorded: as the next begins, or as training ends
    cb.on_train_end({})
    shown = out.getvalue()
    assert shown.startswith("--- sample after epoch 2: 'abc' ->\nabc") and len(cb.last) == 12
    assert set(cb.last) <= set("abcdefgh ") and shown.rstrip("\n").endswith(cb.last)
    assert model.training and not model.drop.training and model.table.training
    assert max(model.contexts) == 4  # cropped to the model's block_size
    assert cb.last in (tmp_path / "samples.txt").read_text()
    again = TextSample(prompt="abc", length=12, temperature=0.5, top_k=3, seed=1, vocabulary=vocab, file=io.StringIO())
    assert again.sample(model) == cb.last  # the seed fixes the draw


def test_text_sample_prints_after_the_progress_line(tmp_path):
    vocab = Vocabulary.build("abcd")
    vocab.save(tmp_path / "vocab.json")  # as trainkit train writes it
    model = Bigram(len(vocab), check_eval=False)
    stream = io.StringIO()
    trainer = trainkit.trainer.Trainer(
        model,
        loss=TokenLoss(nn.CrossEntropyLoss()),
        verbose=True,
        callbacks=[ProgressBar(file=stream), TextSample(prompt="ab", length=5)],
        run_dir=tmp_path,
    )
    ids = trainkit.tensor(vocab.encode("abcdabcdabcd")).reshape(3, 4)
    stdout = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(stdout):
        trainer.fit(ids, ids, epochs=1, batch_size=3)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("Epoch 1/1 - ") and lines[1] == "--- sample after epoch 1: 'ab' ->"
    assert len(lines[2]) == 2 + 5


def test_text_sample_refusals():
    vocab = Vocabulary.build("abc")
    with pytest.raises(ValueError, match="length must be"):
        TextSample(length=0)
    with pytest.raises(ValueError, match="temperature must be positive"):
        TextSample(temperature=0)
    with pytest.raises(ValueError, match="top_k must be"):
        TextSample(top_k=0)
    cb = TextSample(prompt="abz", vocabulary=vocab)
    with pytest.raises(ValueError, match="'z' .* not in the vocabulary"):
        cb.on_train_begin()
    with pytest.raises(ValueError, match="TextSample needs a vocabulary"):
        TextSample().on_train_begin()


def test_train_validation_and_test_windows_do_not_overlap_in_a_run(tmp_path, text_file):
    run = build(load_config(write_config(tmp_path, text_file), ["data.test_split=0.2", "data.stride=3"]))
    spans = {}
    for name in ("train", "val", "test"):
        part = run.split(name)
        windows = [
            int(part.dataset.starts[i])
            if isinstance(part.dataset, TextDataset)
            else int(part.dataset.dataset.starts[part.dataset.indices[i]])
            for i in part.indices
        ]
        assert windows, name
        spans[name] = (min(windows), max(windows) + 8 + 1)  # the last window's targets included
    assert spans["train"][1] <= spans["val"][0] and spans["val"][1] <= spans["test"][0]
    assert spans["test"][1] <= len(TEXT)


@pytest.mark.parametrize("name", ["accuracy", "top2_accuracy"])
def test_accuracy_of_token_logits_counts_every_position_in_either_layout(name):
    logits = np.random.default_rng(3).standard_normal((3, 5, 7)).astype(np.float32)
    targets = np.random.default_rng(4).integers(0, 7, (3, 5))
    k = 2 if name == "top2_accuracy" else 1
    top = np.argsort(-logits, axis=-1)[..., :k]
    want = float((top == targets[..., None]).any(-1).mean())
    for scores in (logits, logits.transpose(0, 2, 1)):  # (N, T, V) as a language model returns, or torch's (N, V, T)
        metric = get_metric(name)
        metric.update(trainkit.tensor(np.ascontiguousarray(scores)), trainkit.tensor(targets))
        assert metric.compute() == pytest.approx(want)
    with pytest.raises(ValueError, match=f"{name}: logits of shape"):
        get_metric(name).update(trainkit.zeros(3, 5, 7), trainkit.zeros(3, dtype=trainkit.int64))


def test_text_sample_shows_after_the_epoch_is_saved_and_a_failed_sample_is_a_warning(tmp_path):
    vocab = Vocabulary.build("abcd")
    vocab.save(tmp_path / "vocab.json")
    model = Bigram(len(vocab), check_eval=False)
    seen = []

    class Broken(TextSample):
        def sample(self, model=None):
            seen.append((tmp_path / "history.jsonl").read_text().count("\n"))  # epochs saved when it samples
            raise IndexError("index out of range in self")

    trainer = trainkit.trainer.Trainer(
        model,
        loss=TokenLoss(nn.CrossEntropyLoss()),
        verbose=False,
        callbacks=[Broken(prompt="ab", length=5)],
        run_dir=tmp_path,
    )
    ids = trainkit.tensor(vocab.encode("abcdabcdabcd")).reshape(3, 4)
    with pytest.warns(RuntimeWarning, match=r"could not sample after epoch \d: IndexError"):
        trainer.fit(trainkit.data.TensorDataset(ids, ids), epochs=2, batch_size=3)
    assert seen == [1, 2]  # each epoch was in history.jsonl before its sample ran
    assert (tmp_path / "checkpoints" / "last.npz").is_file()


@pytest.mark.parametrize(
    "kwargs,word", [({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"file": "out.txt"}, "file")]
)
def test_text_sample_refuses_bad_settings_when_built(kwargs, word):
    with pytest.raises(ValueError, match=word):
        TextSample(**kwargs)


@pytest.mark.parametrize("key", ["validation_split", "test_split"])
def test_a_held_out_share_with_no_window_is_refused_naming_its_key(tmp_path, key):
    path = tmp_path / "t.txt"
    path.write_text("abcdefghij" * 30)  # 300 characters: one window of 250
    with pytest.raises(TextDataError, match="a share of 0.1 holds none of them") as err:
        load_text(path, block_size=250, **{key: 0.1})
    assert err.value.key == key
