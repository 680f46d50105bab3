"""Text for language modelling: a UTF-8 file cut into tokens (characters or words), a vocabulary built from the
training part, and windows of ``block_size`` token ids whose targets are the same ids shifted by one.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
>>> _ = path.write_text("hello world, hello text", encoding="utf-8")
>>> ds = load_text(path, block_size=4)
>>> x, y = ds[0]
>>> ds.vocabulary.decode(x), ds.vocabulary.decode(y)
('hell', 'ello')
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..autograd.creation import from_numpy
from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user
from .dataset import Dataset, Subset

PathLike = str | os.PathLike

LEVELS = ("char", "word")
UNKNOWN = "<unk>"  # word level: the token of words the training part does not hold
VOCABULARY_FILE = "vocab.json"  # its name in a run folder, beside config.yaml


class TextDataError(ValueError):
    """A text that cannot be used as asked; ``key`` is the data key to change (``path``, ``block_size``, ...), so
    that ``trainkit train`` names it beside the config file.

    >>> str(TextDataError("path", "no such file: a.txt"))
    'no such file: a.txt'
    """

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def tokenize(text: str, level: str = "char") -> list[str]:
    """The tokens of ``text``: each character (``level="char"``) or each run of non-whitespace (``"word"``).

    >>> tokenize("to be", "char"), tokenize("to be,\\nor not", "word")
    (['t', 'o', ' ', 'b', 'e'], ['to', 'be,', 'or', 'not'])
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    return list(text) if level == "char" else text.split()


class Vocabulary:
    """Tokens <-> ids. Character level: the characters given (``build``: every character of the text, sorted), and
    an unseen character is an error. Word level: ``<unk>`` first, then every word of the training part, sorted;
    unseen words become ``<unk>``. ``decode`` joins characters as they are and words with one space.

    >>> vocab = Vocabulary.build("abracadabra")
    >>> len(vocab), vocab.encode("cab").tolist(), vocab.decode([4, 0])
    (5, [2, 0, 1], 'ra')
    >>> vocab.encode("abz")
    Traceback (most recent call last):
    ...
    ValueError: 'z' (1 time) is not in the vocabulary of 5 characters
    """

    def __init__(self, tokens: Sequence[str], level: str = "char"):
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary's tokens must be distinct")
        if level == "char" and any(len(t) != 1 for t in tokens):
            raise ValueError("a character vocabulary holds single characters")
        self.tokens = list(tokens)
        self.level = level
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self.unknown = self.index.get(UNKNOWN) if level == "word" else None

    @classmethod
    def build(cls, text: str | Iterable[str], level: str = "char") -> Vocabulary:
        """The vocabulary of ``text`` (a string, tokenized at ``level``, or tokens)."""
        tokens = tokenize(text, level) if isinstance(text, str) else list(text)
        found = sorted(set(tokens) - {UNKNOWN})
        return cls(found if level == "char" else [UNKNOWN, *found], level)

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} {self.level} tokens)"

    def encode(self, text: str | Sequence[str]) -> np.ndarray:
        """The int64 ids of ``text`` (a string, or tokens); a ``ValueError`` naming unseen characters."""
        tokens = tokenize(text, self.level) if isinstance(text, str) else list(text)
        if self.level == "char" and isinstance(text, str):
            return self._encode_chars(text)
        if self.unknown is not None:
            return np.fromiter((self.index.get(t, self.unknown) for t in tokens), np.int64, len(tokens))
        self._refuse_unknown(tokens)
        return np.fromiter((self.index[t] for t in tokens), np.int64, len(tokens))

    def _encode_chars(self, text: str) -> np.ndarray:
        # one pass over code points in NumPy: a per-character dict lookup takes seconds on a few MB
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        known = np.array([ord(t) for t in self.tokens], dtype=np.uint32)
        order = np.argsort(known)
        where = np.searchsorted(known[order], codes)
        where[where == len(known)] = 0
        found = known[order][where] == codes if len(known) else np.zeros(len(codes), bool)
        if not found.all():
            self._refuse_unknown([chr(c) for c in codes[~found]])
        return order[where].astype(np.int64)

    def _refuse_unknown(self, tokens: Sequence[str]) -> None:
        missing: dict[str, int] = {}
        for t in tokens:
            if t not in self.index:
                missing[t] = missing.get(t, 0) + 1
        if not missing:
            return
        shown = ", ".join(f"{t!r} ({n} time{'s' if n > 1 else ''})" for t, n in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        what = "characters" if self.level == "char" else "words"
        raise ValueError(
            f"{shown}{more} {'is' if len(missing) == 1 else 'are'} not in the vocabulary of {len(self)} {what}"
        )

    def decode(self, ids: Iterable[int] | Tensor | np.ndarray) -> str:
        """The text of ``ids`` (a list, an array or a tensor of token ids)."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        tokens = [self.tokens[int(i)] for i in np.asarray(ids).reshape(-1)]
        return "".join(tokens) if self.level == "char" else " ".join(tokens)

    def to_dict(self) -> dict:
        return {"level": self.level, "tokens": self.tokens}

    def save(self, path: PathLike) -> Path:
        """Write the vocabulary as JSON (``{"level": ..., "tokens": [...]}``); ``Vocabulary.load`` reads it."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: PathLike) -> Vocabulary:
        """The vocabulary saved at ``path`` by ``save``."""
        try:
            saved = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(saved["tokens"], saved["level"])
        except FileNotFoundError:
            raise FileNotFoundError(f"no such vocabulary file: {path}") from None
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a vocabulary file ({err})") from None


class TextDataset(Dataset):
    """Windows of a token-id sequence: sample ``i`` is ``(ids[s:s + block_size], ids[s + 1:s + block_size + 1])``
    for the window start ``s = starts[i]``, two int64 tensors of shape (block_size,). ``vocabulary`` turns ids back
    into text.

    >>> ds = TextDataset(np.arange(10), block_size=3, starts=[0, 3, 6], vocabulary=None)
    >>> len(ds), ds[2][0].tolist(), ds[2][1].tolist()
    (3, [6, 7, 8], [7, 8, 9])
    """

    def __init__(
        self,
        ids: np.ndarray,
        block_size: int,
        starts: Sequence[int],
        vocabulary: Vocabulary | None,
        path: PathLike | None = None,
    ):
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.block_size = int(block_size)
        self.starts = np.asarray(starts, dtype=np.int64)
        if len(self.starts) and (self.starts.min() < 0 or self.starts.max() + self.block_size >= len(self.ids)):
            raise ValueError("every window and its targets must lie inside the ids")
        self.vocabulary = vocabulary
        self.path = path

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        s = int(self.starts[index])
        window = self.ids[s : s + self.block_size + 1]
        return from_numpy(window[:-1].copy()), from_numpy(window[1:].copy())

    @property
    def vocab_size(self) -> int | None:
        return None if self.vocabulary is None else len(self.vocabulary)


def vocabulary_of(dataset: Dataset) -> Vocabulary | None:
    """The vocabulary behind ``dataset`` (a TextDataset, or Subsets of one), or None.

    >>> ds = TextDataset(np.arange(3), block_size=1, starts=[0, 1], vocabulary=Vocabulary.build("abc"))
    >>> vocabulary_of(Subset(ds, [1])), vocabulary_of(Subset([7, 8], [0]))
    (Vocabulary(3 char tokens), None)
    """
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return getattr(dataset, "vocabulary", None)


def _windows(length: int, block_size: int, stride: int) -> int:
    return 0 if length < block_size + 1 else (length - block_size - 1) // stride + 1


def _span(windows: int, block_size: int, stride: int) -> int:
    return 0 if windows == 0 else (windows - 1) * stride + block_size + 1


def layout(
    length: int, block_size: int, stride: int, validation_split: float = 0.0, test_split: float = 0.0
) -> tuple[list[int], int]:
    """Window starts over ``length`` tokens, in three runs by position (training, validation, test), such that the
    last ``int(n * test_split)`` of the ``n`` windows are the test run and the last ``int(m * validation_split)`` of
    the ``m`` left are the validation run (the rule ``trainkit train`` splits a dataset by), and no window, targets
    included, reaches into another run's tokens. Returns the starts and the number of tokens of the training part.

    >>> layout(20, 4, 4, validation_split=0.25)
    ([0, 4, 8, 15], 15)
    """
    n = _windows(length, block_size, stride)
    while n > 0:
        n_test = int(n * test_split)
        n_val = int((n - n_test) * validation_split)
        n_train = n - n_test - n_val
        spans = [_span(k, block_size, stride) for k in (n_train, n_val, n_test)]
        if sum(spans) <= length:
            break
        n -= 1
    if n == 0 or n_train == 0:
        return [], 0
    test_from = length - spans[2]
    val_from = test_from - spans[1]
    starts = [k * stride for k in range(n_train)]
    starts += [val_from + k * stride for k in range(n_val)] + [test_from + k * stride for k in range(n_test)]
    return starts, val_from if n_val else test_from if n_test else length


def read_text(path: PathLike, max_mb: float | None = None) -> str:
    """The text of a UTF-8 file; ``TextDataError`` (key ``path``, or ``max_mb`` for a file over that many MB).

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
    >>> _ = path.write_bytes(bytes([99, 97, 102, 233]))  # "café" in Latin-1
    >>> read_text(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trainkit.data.text.TextDataError: .../t.txt is not UTF-8 text: byte 0xe9 at offset 3 (unexpected end of data)...
    """
    path = Path(path)
    if not path.is_file():
        raise TextDataError("path", f"no such file: {path}" + (" (a folder)" if path.is_dir() else ""))
    size = path.stat().st_size
    if max_mb is not None and size > max_mb * 1e6:
        raise TextDataError(
            "max_mb",
            f"{path} is {size / 1e6:.1f} MB, over the limit of {max_mb:g} MB: this "
            "loader keeps the whole text and its ids in memory; raise data.max_mb to "
            "load it anyway",
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TextDataError(
            "path",
            f"{path} is not UTF-8 text: byte 0x{raw[err.start]:02x} at offset {err.start} "
            f"({err.reason}); convert it to UTF-8, e.g. iconv -f latin1 -t utf-8 "
            "(-f utf-16 for UTF-16)",
        ) from None
    if text.startswith("\ufeff"):  # a byte-order mark is no character of the text
        text = text[1:]
    if not text.strip():
        raise TextDataError("path", f"{path} is empty" if not text else f"{path} holds only whitespace")
    return text


def _with_held_out_characters(vocab: Vocabulary, held_out: str, path: PathLike) -> Vocabulary:
    """``vocab`` and, after its own, the characters only the held-out part has, with a warning: the model never
    sees them in training (their probability stays low), but it needs an id to score them."""
    extra = sorted(set(held_out) - set(vocab.tokens))
    if not extra:
        return vocab
    warn_user(
        f"{path}: the held-out part holds {len(extra)} character{'s' if len(extra) > 1 else ''} that the "
        f"training part lacks ({', '.join(map(repr, extra[:10]))}{', ...' if len(extra) > 10 else ''}); added "
        "to the vocabulary, never seen in training"
    )
    return Vocabulary(vocab.tokens + extra, "char")


def load_text(
    path: PathLike,
    block_size: int = 64,
    level: str = "char",
    stride: int | None = None,
    validation_split: float = 0.0,
    test_split: float = 0.0,
    vocabulary: PathLike | Vocabulary | None = None,
    max_mb: float | None = 64.0,
) -> TextDataset:
    """A ``TextDataset`` of next-token windows from a UTF-8 text file, for a language model.

    The text is cut into tokens (``level``: ``"char"`` or ``"word"``, whitespace-separated) and into windows of
    ``block_size`` ids, one every ``stride`` tokens (default ``block_size``: each token is a target once per epoch),
    with the next ids as targets. The windows come in three runs by position: the last ``test_split`` share of the
    text holds the test windows and the ``validation_split`` share before it the validation windows, as
    ``Trainer.fit(validation_split=...)`` and ``trainkit train`` take them from the end, and no window reaches
    across a boundary. The vocabulary is built from the training part (or is ``vocabulary``: a saved one, as
    ``trainkit evaluate`` uses the run's ``vocab.json``); the dataset keeps it as ``.vocabulary``. Held-out words
    the training part lacks become ``<unk>``; held-out characters it lacks are added after its own, with a warning
    (a model needs an id to score them).

    Every refusal is a ``TextDataError`` naming the key to change: no file, not UTF-8, empty, over ``max_mb``
    megabytes (None: no limit), too short for one window, or characters the given vocabulary lacks.

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
    >>> _ = path.write_text("abcdefghij" * 10, encoding="utf-8")
    >>> ds = load_text(path, block_size=8, validation_split=0.2)
    >>> len(ds), ds.vocab_size, int(ds.starts[-1])
    (12, 10, 91)
    """
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise TextDataError("block_size", f"must be a whole number of at least 1, got {block_size!r}")
    stride = block_size if stride is None else stride
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < 1:
        raise TextDataError("stride", f"must be a whole number of at least 1, got {stride!r}")
    if level not in LEVELS:
        raise TextDataError("level", f"must be one of {', '.join(LEVELS)}, got {level!r}")
    text = read_text(path, max_mb)
    tokens = tokenize(text, level)
    what = "characters" if level == "char" else "words"
    if len(tokens) < block_size + 1:
        raise TextDataError(
            "block_size",
            f"{path} holds {len(tokens)} {what}, too few for one window of "
            f"block_size {block_size} and its next-token target ({block_size + 1} "
            f"{what}): lower data.block_size or use a longer text",
        )
    starts, train_end = layout(len(tokens), block_size, stride, validation_split, test_split)
    if not starts:
        raise TextDataError(
            "validation_split",
            f"{path} holds {len(tokens)} {what}: too few for a training window "
            f"of block_size {block_size} beside the held-out share "
            f"(validation_split {validation_split}, test_split {test_split})",
        )
    n_test = int(len(starts) * test_split)  # the held-out counts, by the rule layout() splits by
    n_val = int((len(starts) - n_test) * validation_split)
    for key, share, count in (("validation_split", validation_split, n_val), ("test_split", test_split, n_test)):
        if share > 0 and count == 0:
            raise TextDataError(
                key,
                f"{path} makes {len(starts)} window(s) of block_size {block_size}: a share of "
                f"{share} holds none of them, so its loss would be nan; lower data.block_size "
                f"or data.stride, raise data.{key}, or set it to 0",
            )
    if isinstance(vocabulary, Vocabulary):
        vocab, source = vocabulary, "the vocabulary given"
    elif vocabulary is not None:
        try:
            vocab = Vocabulary.load(vocabulary)
        except (FileNotFoundError, ValueError) as err:
            raise TextDataError("vocabulary", str(err)) from None
        source = f"the vocabulary {vocabulary}"
        if vocab.level != level:
            raise TextDataError("level", f"is {level!r}, but {vocabulary} is a {vocab.level}-level vocabulary")
    else:
        vocab, source = Vocabulary.build(tokens[:train_end], level), None
        if level == "char":
            vocab = _with_held_out_characters(vocab, text[train_end:], path)
    try:
        ids = vocab.encode(text if level == "char" else tokens)
    except ValueError as err:
        where = source or f"the vocabulary of the training part (its first {train_end} {what})"
        raise TextDataError(
            "path",
            f"{path}: {str(err).split(' not in the vocabulary')[0]} not in {where}: a model "
            "trained on it has no id for them",
        ) from None
    return TextDataset(ids, block_size, starts, vocab, path)
