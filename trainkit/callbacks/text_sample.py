"""``TextSample``: print a continuation of a prompt sampled from a language model at the end of epochs."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd import grad_mode
from ..autograd.creation import from_numpy
from ..autograd.ops.sampling import multinomial
from ..autograd.random import Generator
from ..autograd.tensor import Tensor
from ..data.text import Vocabulary
from ..training.run_folder import RunFolder
from .base import Callback, Logs
from .progress import ProgressBar


def sample_next(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, generator: Generator | None = None
) -> int:
    """One token id drawn from ``softmax(logits / temperature)`` over the ``top_k`` largest logits (all when None),
    with ``multinomial``.

    >>> import trainkit
    >>> sample_next(trainkit.tensor([0.0, 9.0, 1.0]), top_k=1)
    1
    """
    scores = logits.float() / temperature
    if top_k is not None and top_k < scores.shape[-1]:
        kth = scores.topk(top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    return int(multinomial(scores.softmax(-1), 1, generator=generator).item())


class TextSample(Callback):
    """After every ``every``-th epoch, print ``prompt`` and ``length`` tokens the model samples after it.

    The model takes token ids (1, T) and returns logits (1, T, V); each next token is drawn (``multinomial``) from the
    last position's logits divided by ``temperature`` (lower: surer, duller text), among the ``top_k`` most likely
    (None: all), with a generator seeded by ``seed`` so that epochs are comparable. The context is cropped to the
    model's ``block_size`` attribute, when it has one. The model runs in eval mode without building graphs, and gets its
    training flags back. Token ids are decoded with ``vocabulary`` (a ``Vocabulary`` or a path), else the run
    folder's ``vocab.json`` that ``trainkit train`` writes for ``data.kind: text``. The text is printed once the epoch
    is recorded and checkpointed (as the next epoch begins, or as training ends), to the progress bar's stream, and
    appended to the run folder's ``samples.txt``; a sample that fails is a warning, never the end of training.
    Both count epochs from 1, as the console does (``--- sample after epoch 1``).

    Args:
        prompt (str, default '\\n'): the text the samples continue.
        length (int, default 200): tokens sampled after the prompt.
        temperature (float, default 1.0): the logits are divided by it before sampling; lower: surer, duller text.
        top_k (int | None, default None): sample among this many most likely tokens; None: among all.
        every (int, default 1): sample after every this many epochs.
        seed (int, default 0): the seed of the sampling's generator, the same at every epoch.
        vocabulary (Vocabulary | str | Path | None, default None): a ``Vocabulary`` or its ``vocab.json``; None:
            the run folder's ``vocab.json``.
        file (Any, default None): the stream to print to; None: the progress bar's (standard output).

    >>> from trainkit.data import Vocabulary
    >>> cb = TextSample(prompt="ab", length=5, vocabulary=Vocabulary.build("abc"))
    >>> cb.length, cb.every
    (5, 1)
    """

    rank_zero_only = True
    order = Callback.RECORD + 1  # after the progress bar has written the epoch's line

    def __init__(
        self,
        prompt: str = "\n",
        length: int = 200,
        temperature: float = 1.0,
        top_k: int | None = None,
        every: int = 1,
        seed: int = 0,
        vocabulary: Vocabulary | str | Path | None = None,
        file: Any = None,
    ) -> None:
        super().__init__()
        if not isinstance(length, int) or length < 1:
            raise ValueError(f"length must be a whole number of at least 1, got {length!r}")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a whole number of at least 1, got {every!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be a whole number of at least 1 or None, got {top_k!r}")
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a whole number of 0 or more, got {seed!r}")
        if file is not None and not callable(getattr(file, "write", None)):
            raise ValueError(
                f"file must be a stream to print to (an object with a write method), got {file!r}; "
                "the samples are also written to the run folder's samples.txt"
            )
        self.prompt, self.length, self.temperature, self.top_k = prompt, length, temperature, top_k
        self.every, self.seed, self.file = every, seed, file
        self.vocabulary = vocabulary
        self.last: str | None = None  # the last continuation sampled
        self._due: int | None = None  # the epoch whose sample is still to be shown

    def _vocabulary(self) -> Vocabulary:
        if isinstance(self.vocabulary, Vocabulary):
            return self.vocabulary
        path = self.vocabulary
        if path is None:
            folder = RunFolder.of(self.run_dir)
            if folder is None or not folder.vocabulary.is_file():
                raise ValueError(
                    "TextSample needs a vocabulary: pass vocabulary= (a Vocabulary or a vocab.json), "
                    "or train with data.kind text, which writes the run folder's vocab.json"
                )
            path = folder.vocabulary
        self.vocabulary = Vocabulary.load(path)
        return self.vocabulary

    def on_train_begin(self, logs: Logs | None = None) -> None:
        prompt = self._vocabulary().encode(self.prompt)  # an unknown character is refused now, not after an epoch
        if not len(prompt):
            raise ValueError(f"prompt {self.prompt!r} holds no {self._vocabulary().level} token")

    def sample(self, model: Any = None) -> str:
        """``length`` tokens sampled after the prompt, decoded (the prompt not included)."""
        model = self.model if model is None else model
        vocab = self._vocabulary()
        ids = list(vocab.encode(self.prompt))
        if not ids:
            raise ValueError(f"prompt {self.prompt!r} holds no {vocab.level} token")
        block = getattr(model, "block_size", None)
        device = next((p.device for p in model.parameters()), None)
        generator = Generator(device if device is not None else "cpu").manual_seed(self.seed)
        was_training = [(m, m.training) for m in model.modules()]
        model.eval()
        try:
            with grad_mode.no_grad():
                for _ in range(self.length):
                    context = np.asarray(ids[-block:] if block else ids, dtype=np.int64)[None]
                    inputs = from_numpy(context)
                    if device is not None and device.type != "cpu":
                        inputs = inputs.to(device)
                    logits = model(inputs)
                    last = logits[0, -1] if logits.ndim == 3 else logits[-1]
                    ids.append(sample_next(last, self.temperature, self.top_k, generator))
        finally:
            for module, mode in was_training:
                object.__setattr__(module, "training", mode)  # as it was, module by module
        self.last = vocab.decode(ids[-self.length :])
        return self.last

    def _stream(self) -> tuple[Any, Any]:
        """Where the progress output goes, and its open progress bar (or None)."""
        if self.file is not None:
            return self.file, None
        bars = [
            cb
            for cb in getattr(getattr(self.trainer, "callbacks", None), "callbacks", []) or []
            if isinstance(cb, ProgressBar)
        ]
        return (bars[0].stream, bars[0].bar) if bars else (sys.stdout, None)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        # The epoch is recorded and checkpointed after on_epoch_end: the sample waits until then (the next epoch's
        # beginning, or the end of training; the weights are the same), so that neither a failed sample nor a
        # Ctrl-C while sampling can cost the epoch.
        if (epoch + 1) % self.every == 0:
            self._due = epoch + 1

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._show_due()

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._show_due()

    def _show_due(self) -> None:
        epoch, self._due = self._due, None
        if epoch is None:
            return
        try:
            text = self.sample()
        except Exception as err:  # noqa: BLE001  (a sample only shows progress: training goes on without it)
            warnings.warn(
                f"TextSample could not sample after epoch {epoch}: {type(err).__name__}: {err}",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        joint = "" if self._vocabulary().level == "char" else " "
        shown = f"--- sample after epoch {epoch}: {self.prompt!r} ->\n{self.prompt}{joint}{text}"
        stream, bar = self._stream()
        if bar is not None:  # a bar still open: written above it
            bar.write(shown, file=stream)
        else:
            print(shown, file=stream, flush=True)
        if self.run_dir is not None and Path(self.run_dir).is_dir():
            with open(RunFolder(self.run_dir).samples, "a", encoding="utf-8") as f:
                f.write(f"{shown}\n\n")
