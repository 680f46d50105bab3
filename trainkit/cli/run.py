"""A training run from a checked config: the model, data, optimizer, loss, callbacks and Trainer it describes.

``build`` passes each section's settings on by name: the trainer section's keys go to ``Trainer(...)`` or to
``Trainer.fit`` (whichever takes them), a data kind of ``trainkit.registry.DATA_KINDS`` takes the data keys its
loader takes, and the named optimizer, scheduler, loss and callbacks come from the registries of
``trainkit.registry``. What those raise is reported as a ``ConfigError`` naming the config file and the key.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..autograd.random import manual_seed
from ..callbacks.base import Callback
from ..callbacks.lr_scheduler import LRSchedulerCallback
from ..callbacks.nan import TerminateOnNaN
from ..data import ConcatDataset, TextDataError, vocabulary_of
from ..data.dataset import split_tail
from ..data.files import MissingDataError, classes_of, csv_columns, load_classes, save_classes
from ..distributed import launched_size, world
from ..layers.loss import CrossEntropyLoss, NLLLoss
from ..registry import (
    CALLBACKS,
    DATA_KINDS,
    LOSSES,
    OPTIMIZERS,
    SCHEDULERS,
    ClassPathError,
    Registry,
    UnknownNameError,
    by_name,
)
from ..registry import build as make
from ..serialization.files import naming, temporary_beside
from ..trainer import Trainer
from ..training.checkpoint import CheckpointError
from ..training.run_folder import LATEST, RunFolder, latest_version, version_folder, version_number, versions
from .config import ConfigError, RunConfig, class_error, dump, resolve_class
from .run_lock import RunLock, remove_stale_temporaries


@dataclass
class Run:
    """What ``build`` returns: a Trainer and what to call ``fit`` with (``dataset``: the training and validation
    samples; ``test``: the held-out test samples, or None). ``callbacks`` are those the config named and the
    ``TerminateOnNaN`` that ``trainer.terminate_on_nan`` asks for, as given to the Trainer: what the command reads
    after training (where a run diverged, which epoch's weights ``EarlyStopping`` restored)."""

    trainer: Trainer
    dataset: object
    run_dir: Path
    fit_args: dict = field(default_factory=dict)
    test: object = None
    callbacks: list = field(default_factory=list)

    @property
    def folder(self) -> RunFolder:
        """The paths of the run folder (``run_dir``)."""
        return RunFolder(self.run_dir)

    def first(self, kind: type, attribute: str) -> Callback | None:
        """The first of ``callbacks`` of type ``kind`` whose ``attribute`` is set (not None), else None: after
        ``fit``, ``run.first(EarlyStopping, "restored_epoch")`` is the EarlyStopping that restored weights."""
        return next((cb for cb in self.callbacks if isinstance(cb, kind) and getattr(cb, attribute) is not None), None)

    def split(self, name: str) -> object:
        """The samples of split ``name``: 'train', 'val' and 'test' as training takes them, or 'all'."""
        if name == "test":
            if self.test is None:
                raise ValueError("the config holds out no test split: set data.test_split")
            return self.test
        train, val = split_tail(self.dataset, self.fit_args.get("validation_split", 0.0))  # as fit splits it
        if name == "val":
            if not len(val):
                raise ValueError("the config holds out no validation split: set data.validation_split")
            return val
        if name == "train":
            return train
        if name == "all":
            return self.dataset if self.test is None else ConcatDataset([self.dataset, self.test])
        raise ValueError(f"unknown split {name!r}: train, val, test or all")

    def default_split(self) -> str:
        """What ``trainkit evaluate`` scores unless told: the test split, else the validation split, else all."""
        return "test" if self.test is not None else "val" if self.fit_args.get("validation_split") else "all"


def _kwargs_error(config: RunConfig, key: str, err: Exception) -> ConfigError:
    return ConfigError(f"{config.file}: '{key}': {err}")


# ---------------------------------------------------------------------------------------------------- the parts
def _named(config: RunConfig, registry: Registry, name: str, key: str, **kwargs):
    try:
        return make(registry, name, **kwargs)
    except UnknownNameError as err:  # a config from load() has only known names; a hand-made one may not
        raise ConfigError(f"{config.file}: '{key}' names an {err}") from None
    except (TypeError, ValueError) as err:
        raise _kwargs_error(config, key.rpartition(".name")[0] or key, err) from None


def _optimizer(config: RunConfig, model):
    spec = config.optimizer
    kwargs = {"lr": spec.lr} if spec.lr is not None else {}
    kwargs.update(spec.options or {})
    if spec.class_path is None:
        return _named(config, OPTIMIZERS, spec.name, "optimizer.name", params=model.parameters(), **kwargs)
    cls = resolve_class(spec.class_path, config.folder, config.file, "optimizer.class_path")
    try:
        return cls(model.parameters(), **kwargs)
    except (TypeError, ValueError) as err:
        raise _kwargs_error(config, "optimizer", err) from None


# What a loss takes as its target, for files that cannot say (a CSV label column; float labels in an .npz).
_INDEX_TARGETS = ("CrossEntropyLoss", "NLLLoss")


def _task(config: RunConfig) -> str | None:
    name = config.loss if isinstance(config.loss, str) else config.loss["name"]
    try:
        cls = LOSSES.get(name)
    except UnknownNameError:
        return None
    return "classification" if cls.__name__ in _INDEX_TARGETS else "regression"


# The data kinds that read one file named by data.path, and whose label column may hold class names.
_FILE_KINDS = ("npz", "csv")


def _data_file(config: RunConfig, spec: dict) -> None:
    """Refuse, naming the key, what a file kind would fail on later: a data.path that names no file, a CSV without
    data.targets (a dataset of inputs alone, whose first step would find no targets)."""
    path = config.folder / spec["path"]
    if not path.is_file():
        what = "a folder, not a file" if path.is_dir() else "no such file"
        raise ConfigError(f"{config.file}: 'data.path': {what}: {path}")
    if spec["kind"] == "csv" and not spec.get("targets"):
        try:
            columns = ", ".join(map(repr, csv_columns(path, spec.get("delimiter") or ",")))
        except (OSError, UnicodeDecodeError, ValueError):  # the loader names what is wrong with the file
            columns = None
        held = f" (its columns: {columns})" if columns else ""
        raise ConfigError(f"{config.file}: 'data.targets' is not set: name the label column(s) of {path}{held}")


def _missing_file(config: RunConfig, init_args: dict, err: FileNotFoundError) -> ConfigError | None:
    """A class_path dataset's missing file as a config error naming the key of ``data.init_args`` whose path led
    to it (``root: data`` for ``data/MNIST/raw/...``); None when no key's value does."""
    missing = Path(err.filename).resolve() if isinstance(err.filename, (str, os.PathLike)) else None
    for key, value in init_args.items():
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            continue
        given = Path(value).resolve()
        if missing is not None and (missing == given or given in missing.parents):
            return ConfigError(f"{config.file}: 'data.init_args.{key}': no such file: {missing}")
        if missing is None and str(value) in str(err):  # np.loadtxt's error names the file in words only
            return ConfigError(f"{config.file}: 'data.init_args.{key}': no such file: {given}")
    return None


def _dataset(config: RunConfig, classes: list[str] | None = None):
    spec = dataclasses.asdict(config.data)  # a data kind takes the section as a mapping
    if spec["kind"] in _FILE_KINDS:
        spec = {**spec, "task": spec.get("task") or _task(config)}  # a data.task key, when given, decides
        if classes is not None and spec.get("classes") is None:  # a run's class names, in its indices' order
            spec["classes"] = classes
        _data_file(config, spec)
    try:
        make_dataset = DATA_KINDS.get(spec["kind"])
    except UnknownNameError as err:  # a config from load() has only known kinds; a hand-made one may not
        raise ConfigError(f"{config.file}: 'data.kind' names an {err}") from None
    try:
        return make_dataset(spec, config.folder)
    except TextDataError as err:  # the text file or a key that does not fit it: the key to change is named
        raise ConfigError(f"{config.file}: 'data.{err.key}': {err}") from None
    except ClassPathError as err:
        raise class_error(config.file, "data.class_path", spec["class_path"], err) from None
    except TypeError as err:  # keys that do not fit the loader (init_args for the class_path kind)
        raise _kwargs_error(config, "data.init_args" if spec["kind"] == "class_path" else "data", err) from None
    except MissingDataError as err:  # a column or array the file lacks, named by data.inputs or data.targets
        raise _kwargs_error(config, f"data.{err.key}", err) from None
    except FileNotFoundError as err:
        if spec["kind"] in _FILE_KINDS:  # the file went away since it was looked for
            raise ConfigError(f"{config.file}: 'data.path': no such file: {config.folder / spec['path']}") from None
        found = _missing_file(config, spec.get("init_args") or {}, err) if spec["kind"] == "class_path" else None
        if found is None:
            raise
        raise found from None
    except KeyError as err:  # a missing array or column of a file; what a user's own dataset raises is its own
        if spec["kind"] == "class_path":
            raise
        raise _kwargs_error(config, "data", err) from None


class TokenLoss:
    """A loss over every token of a sequence: logits (N, T, V), as a language model returns them, and targets
    (N, T) are flattened to (N*T, V) and (N*T,), as one writes ``F.cross_entropy(logits.view(-1, V), y.view(-1))``
    in PyTorch; other shapes (torch's (N, V, T) layout included) go to ``loss`` as they are. ``trainkit train``
    wraps the config's loss in it for ``data.kind: text``.

    >>> import trainkit
    >>> from trainkit import nn
    >>> TokenLoss(nn.CrossEntropyLoss())(trainkit.zeros(2, 3, 4), trainkit.zeros(2, 3, dtype=trainkit.int64))
    tensor(1.3863)
    """

    def __init__(self, loss) -> None:
        self.loss = loss

    def __call__(self, output, target):
        if output.ndim == 3 and target.ndim == 2 and tuple(output.shape[:2]) == tuple(target.shape):
            return self.loss(output.reshape(-1, output.shape[-1]), target.reshape(-1))
        return self.loss(output, target)

    def __repr__(self) -> str:
        return f"TokenLoss({self.loss!r})"


def _loss(config: RunConfig):
    spec = config.loss
    if isinstance(spec, str):
        loss = _named(config, LOSSES, spec, "loss")
    else:
        options = {k: v for k, v in spec.items() if k != "name"}
        loss = _named(config, LOSSES, spec["name"], "loss.name", **options)
    if config.data.kind != "text":
        return loss
    if not isinstance(loss, (CrossEntropyLoss, NLLLoss)):  # token ids are classes: a regression loss cannot fit
        name = spec if isinstance(spec, str) else spec["name"]
        raise ConfigError(
            f"'loss' is {name!r}, but data.kind text gives next-token class ids: "
            "use loss: cross_entropy (or nll with a model that returns log-probabilities)"
        )
    return TokenLoss(loss)


# Model arguments a text dataset knows, filled in when the model's class takes them and the config leaves them out.
_FROM_TEXT = ("vocab_size", "block_size")


def _fill_from_data(config: RunConfig, model_cls, dataset) -> None:
    """Give the model's ``vocab_size`` and ``block_size`` from the text data when ``model.init_args`` omits them;
    refuse a given ``vocab_size`` smaller than the vocabulary."""
    vocabulary = vocabulary_of(dataset)
    if vocabulary is None:
        return
    known = {"vocab_size": len(vocabulary), "block_size": getattr(dataset, "block_size", config.data.block_size)}
    init_args = config.model.init_args
    try:
        params = inspect.signature(model_cls).parameters
    except (TypeError, ValueError):
        return
    for key in _FROM_TEXT:
        if key in params and key not in init_args:
            init_args[key] = known[key]
    given = init_args.get("vocab_size")
    if isinstance(given, int) and given < known["vocab_size"]:
        raise ConfigError(
            f"{config.file}: 'model.init_args.vocab_size' is {given}, but the vocabulary of "
            f"{config.data.path} holds {known['vocab_size']} tokens; leave it out to take the "
            "vocabulary's size"
        )


def _callback(config: RunConfig, i: int, spec):
    if isinstance(spec, str):
        spec = {"name": spec}
    options = {k: v for k, v in spec.items() if k not in ("name", "class_path")}
    if "class_path" not in spec:
        return _named(config, CALLBACKS, spec["name"], f"callbacks[{i}].name", **options)
    cls = resolve_class(spec["class_path"], config.folder, config.file, f"callbacks[{i}].class_path")
    try:
        return cls(**options)
    except TypeError as err:
        raise _kwargs_error(config, f"callbacks[{i}]", err) from None


def _takes(func, key: str) -> bool:
    params = inspect.signature(func).parameters
    return key in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _trainer_and_fit_settings(settings: dict) -> tuple[dict, dict]:
    """Split the trainer section by name: what ``Trainer.fit`` alone names goes to fit, the rest to
    ``Trainer(...)`` (a key both take, as ``verbose``, sets the Trainer's default)."""
    fit_names = inspect.signature(Trainer.fit).parameters
    trainer_names = inspect.signature(Trainer).parameters
    to_fit = {k: v for k, v in settings.items() if k in fit_names and k not in trainer_names}
    to_trainer = {k: v for k, v in settings.items() if k not in to_fit}
    for key in to_trainer:
        if not _takes(Trainer, key):
            raise TypeError(
                f"trainer.{key} is declared in trainkit.cli.config but neither Trainer nor Trainer.fit takes it"
            )
    return to_trainer, to_fit


def build(config: RunConfig, run_dir: str | Path | None = None, classes: list[str] | None = None) -> Run:
    """Make everything ``config`` describes (a checked config from ``trainkit.cli.config.load``), for a run writing to
    ``run_dir`` (by default ``output_dir/name``; ``trainkit train`` gives it a version folder, ``start_run``).
    ``classes`` are the class names of a run whose labels were names (its ``classes.json``): a csv or npz label
    column is then numbered as that run's was.

    The model is built on the CPU right after ``manual_seed(trainer.seed)``, so its initial weights come from the
    seed; the Trainer, given the same ``seed`` and ``device``, moves it to its device (once) and starts the streams
    of dropout and the batch order from the seed again, so a run repeats whatever the model's size.

    >>> from trainkit.cli.config import load
    >>> run = build(load("configs/regression.yaml", ["trainer.verbose=false"]))  # doctest: +SKIP
    >>> run.fit_args  # doctest: +SKIP
    {'epochs': 200, 'batch_size': 10, 'shuffle': True, 'validation_split': 0.0}
    """
    file = config.file
    trainer_args, fit_args = _trainer_and_fit_settings(dataclasses.asdict(config.trainer))
    dataset = _dataset(config, classes)  # first: a text's vocabulary gives the model its vocab_size
    manual_seed(trainer_args["seed"])  # before the model: its initial weights come from this seed
    model_cls = resolve_class(config.model.class_path, config.folder, file, "model.class_path")
    _fill_from_data(config, model_cls, dataset)
    try:
        model = model_cls(**config.model.init_args)
    except TypeError as err:
        raise _kwargs_error(config, "model.init_args", err) from None
    # The Trainer moves the model to trainer.device in place (the Parameters stay the optimizer's), resolving the
    # device per process in data-parallel runs; moving it here too would copy it twice.
    optimizer = _optimizer(config, model)
    scheduler = None
    if config.scheduler.name is not None:
        scheduler = _named(
            config, SCHEDULERS, config.scheduler.name, "scheduler.name", optimizer=optimizer, **config.scheduler.options
        )

    run_dir = Path(config.output_dir) / config.name if run_dir is None else Path(run_dir)
    callbacks = [_callback(config, i, spec) for i, spec in enumerate(config.callbacks)]
    if scheduler is not None and config.scheduler.interval == "step":  # the callback steps it after each update
        callbacks.append(LRSchedulerCallback(scheduler, interval="step"))
        scheduler = None
    if trainer_args.get("terminate_on_nan") and not any(isinstance(cb, TerminateOnNaN) for cb in callbacks):
        callbacks.append(TerminateOnNaN())  # the one the Trainer would add, made here to read where a run diverged
    try:
        trainer = Trainer(
            model,
            optimizer,
            _loss(config),
            config.metrics,
            callbacks,
            scheduler=scheduler,
            freeze=config.freeze,
            run_dir=run_dir,
            **trainer_args,
        )
    except ValueError as err:
        raise ConfigError(f"{file}: {err}") from None
    fit_args.update(by_name(dataclasses.asdict(config.data), Trainer.fit))  # validation_split
    test = None
    head, tail = split_tail(dataset, config.data.test_split)
    if len(tail):  # the last share, as validation_split takes its share from the end of what is left
        dataset, test = head, tail
    return Run(trainer, dataset, run_dir, fit_args, test, callbacks)


# ------------------------------------------------------------------------------------------------- run folders
def _mark_latest(base: Path) -> None:
    found = versions(base)
    if not found:
        (base / LATEST).unlink(missing_ok=True)
        return
    # A temporary name of this process's and thread's own: runs starting together each replace ``latest`` whole.
    # Whoever writes last looks again, so a run that saw fewer versions never leaves ``latest`` naming an older one.
    tmp = temporary_beside(base / LATEST)
    with naming(base / LATEST):
        try:
            while True:
                newest = found[-1].name
                tmp.write_text(newest + "\n")
                os.replace(tmp, base / LATEST)
                found = versions(base)
                if not found:  # the version it named went meanwhile (a failed run removing its own)
                    (base / LATEST).unlink(missing_ok=True)
                    return
                if found[-1].name == newest:
                    return
        finally:
            tmp.unlink(missing_ok=True)


def find_checkpoint(where: str | Path, option: str = "--resume") -> tuple[Path, Path | None]:
    """What ``--resume WHERE`` resumes: (the checkpoint, the run folder to continue in). ``WHERE`` is a checkpoint
    file, a run folder (``output_dir/name/version_N``: its ``last.npz``, or ``interrupted.npz`` when that is newer),
    or ``output_dir/name`` (its latest version). A checkpoint outside a run folder continues in a new version.
    ``option`` names the command-line option in errors (``trainkit evaluate --checkpoint`` takes the same)."""
    where = Path(where)
    if where.is_file():
        run = RunFolder.of_checkpoint(where)
        return where, None if run is None else run.root
    if not where.is_dir():
        raise CheckpointError(f"{option} {where}: no such run folder or checkpoint file")
    run = RunFolder(where.parent if where.name == RunFolder.CHECKPOINTS else where)  # RUN/checkpoints: RUN
    if not run.checkpoints.is_dir() and latest_version(where) is not None:
        run = RunFolder(latest_version(where))
    found = run.resumable()
    if not found:
        raise CheckpointError(
            f"{option} {where}: no checkpoint at {run.last} (nor {run.interrupted.name}); name a "
            "run folder runs/NAME/version_N, runs/NAME, or a .npz file"
        )
    return max(found, key=lambda p: p.stat().st_mtime_ns), run.root  # last.npz when both have the same time


def saved_beside(checkpoint: str | Path) -> RunFolder:
    """The run folder whose files (vocab.json, classes.json) go with a checkpoint: the folder holding its
    ``checkpoints/``, else the checkpoint's own folder (a weights file with its run's files beside it)."""
    path = Path(checkpoint).resolve()
    return RunFolder.of_checkpoint(path) or RunFolder(path.parent)


def saved_classes(config: RunConfig, folder: RunFolder) -> list[str] | None:
    """The class names a run in ``folder`` numbered its labels by (its classes.json), for a csv or npz config; None
    when it saved none (its labels were numbers)."""
    if config.data.kind not in _FILE_KINDS or not folder.classes.is_file():
        return None
    return load_classes(folder.classes)


class _SaveConfig(Callback):
    """Writes the run's config.yaml once its first epoch has ended: a resume that fails before leaves the run
    folder's config as it was."""

    rank_zero_only = True

    def __init__(self, path: Path, text: str) -> None:
        super().__init__()
        self.path, self.text = path, text

    def on_epoch_end(self, epoch, logs=None) -> None:
        if self.text is not None:
            tmp = self.path.with_name(self.path.name + ".tmp")
            with naming(self.path):
                tmp.write_text(self.text)
                os.replace(tmp, self.path)
            self.text = None


@dataclass
class Started:
    """What ``start_run`` returns: the built run, the checkpoint to resume from (or None), and whether its folder
    is new (``abandon`` removes a new one that holds no finished epoch)."""

    run: Run
    resume: Path | None
    new_folder: bool
    lock: RunLock | None = None
    kept: Path | None = None  # the deepest folder that existed before the run
    saver: _SaveConfig | None = None  # writes a resumed run's config.yaml once an epoch has ended

    def release(self) -> None:
        """Free the run folder's lock (when the run ends, however it ends)."""
        if self.lock is not None:
            self.lock.release()

    def abandon(self) -> bool:
        """Remove a new run folder in which no epoch finished (and the name's folder, when left empty); True if
        it did. Runs on the writing process only."""
        trainer = self.run.trainer
        if not self.new_folder or trainer.epochs_done > 0 or trainer.rank != 0:
            return False
        self.release()
        _remove_new_version(self.run.run_dir, self.kept if self.kept is not None else self.run.run_dir.parent)
        return True

    def interrupted(self) -> str:
        """After Ctrl-C: save ``checkpoints/interrupted.npz`` (and the config it was trained with) and say how to
        resume; a run with no finished epoch is removed instead."""
        if self.abandon():
            return "interrupted before the first epoch ended: nothing saved"
        folder = self.run.folder
        saved = self.run.trainer.save_checkpoint(folder.interrupted)
        if self.saver is not None:
            self.saver.on_epoch_end(-1)  # the checkpoint just saved belongs to this config
        return (
            f"interrupted: saved {saved}; the last finished epoch is in {folder.last.relative_to(folder.root)}\n"
            f"resume with: trainkit train {folder.config} --resume {folder.root}"
        )


def start_run(config: RunConfig, resume: str | Path | None = None) -> Started:
    """Build the run ``config`` describes in its run folder: a new ``output_dir/name/version_N`` (``latest`` then
    names it), or, with ``resume``, the folder of the run resumed (``find_checkpoint``). The folder's config.yaml is
    ``dump``'s text (the files it reads absolute): written now for a new folder, at the first epoch's end for a
    resumed one. A new folder that cannot be set up (a full disk) is removed again, its lock released.

    >>> from trainkit.cli.config import load
    >>> started = start_run(load("configs/regression.yaml"))  # doctest: +SKIP
    >>> started.run.run_dir  # doctest: +SKIP
    PosixPath('runs/regression/version_0')
    """
    checkpoint, folder = find_checkpoint(resume) if resume is not None else (None, None)
    lead = launched_size() == 1 or world().rank == 0
    base = Path(config.output_dir) / config.name
    new = folder is None
    lock = None
    kept = base  # the deepest folder that exists already: a run that fails before its first epoch removes the rest
    while not kept.exists() and kept != kept.parent:
        kept = kept.parent
    if new and config.data.kind in _FILE_KINDS:  # a missing data file fails before any folder is made for the run
        _data_file(config, dataclasses.asdict(config.data))
    if lead:
        if new:
            folder = _new_version(base)  # created here: a run started at the same moment takes the next one
        lock = RunLock(folder).acquire()  # a second writer of this folder fails now, naming the first
        remove_stale_temporaries(folder)
    if launched_size() > 1:
        folder = world().broadcast_object(folder)
    files = RunFolder(folder)
    resumed_text = not new and config.data.kind == "text" and config.data.vocabulary is None
    if resumed_text and files.vocabulary.is_file():  # the ids the checkpoint was trained on
        config.data.vocabulary = str(files.vocabulary.resolve())
    try:
        classes = None if new else saved_classes(config, files)  # the class indices the checkpoint was trained on
        run = build(config, run_dir=folder, classes=classes)
        saver = _set_up(run, config, files, new, lead)
    except BaseException:
        if lock is not None:
            lock.release()
            if new:
                _remove_new_version(folder, kept)
        raise
    return Started(run, checkpoint, new, lock, kept, saver)


def _set_up(run: Run, config: RunConfig, files: RunFolder, new: bool, lead: bool) -> _SaveConfig | None:
    """Write what a run folder holds before training: the vocabulary and class names the data was numbered by, and
    config.yaml (now for a new folder; for a resumed one, the returned callback writes it once an epoch has ended)."""
    text = dump(config)
    vocabulary = vocabulary_of(run.dataset)
    if lead and vocabulary is not None:  # beside config.yaml: evaluate and the sampling callback decode with it
        with naming(files.vocabulary):
            vocabulary.save(files.vocabulary)
    classes = classes_of(run.dataset) if config.data.kind in _FILE_KINDS else None
    if lead and classes is not None:  # beside config.yaml: evaluate numbers a test file's labels the same way
        with naming(files.classes):
            save_classes(files.classes, classes)
    if lead and new:
        with naming(files.config):
            files.config.write_text(text)
        _mark_latest(files.root.parent)
        return None
    if not lead:
        return None
    saver = _SaveConfig(files.config, text)
    run.trainer.callbacks.append(saver)
    saver.set_trainer(run.trainer)
    return saver


def _new_version(base: Path) -> Path:
    """Create and return the next ``base/version_N`` that no other run has taken."""
    found = versions(base)
    number = version_number(found[-1]) + 1 if found else 0
    while True:
        folder = version_folder(base, number)
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            number += 1


def _remove_new_version(folder: Path, kept: Path) -> None:
    """Remove a version folder no epoch finished in, and the folders made for it that are left empty, up to
    ``kept`` (which existed before)."""
    shutil.rmtree(folder, ignore_errors=True)
    try:
        _mark_latest(folder.parent)
    except OSError:  # a full disk: ``latest`` keeps naming the newest version from before, which is still right
        pass
    parent = folder.parent
    while parent != kept and kept in parent.parents and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
