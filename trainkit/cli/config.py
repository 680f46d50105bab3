"""Run configs: the YAML schema as dataclasses, one field per key, checked in full before anything trains.

Each section of a config is a dataclass below, and each key one field of it, declared once with ``setting``: its
type (the annotation), its default, the values it allows (``choices``: a tuple or a registry of
``trainkit.registry``) or its bounds (``ge``, ``gt``, ``lt``), and a line of help. Where a default means the same as
a keyword default of the code that receives it, it is read from that code's signature (``default_of``), so no
number is written twice. The machinery that reads, checks and writes the declarations is
``trainkit.cli.settings``.

Adding a key is one edit, a field in its section: ``warmup: int = setting(0, "warm-up epochs", ge=0)`` in
``TrainerSection`` is then read, defaulted, checked, printed and passed by name to ``Trainer`` (or ``fit``) by
``trainkit.cli.run.build``; a rule that ties keys together goes in the section's ``check`` (raise ``SettingError``).

``load`` returns the complete config as a ``RunConfig``: every section an instance of its dataclass, every key set,
defaults filled in (``config.trainer.epochs``). ``dump`` writes it as YAML with each key's help as a comment
(``trainkit train --print-config``), the files it reads made absolute (``portable``), so what it writes loads again
from any folder. Every mistake is reported as a ``ConfigError`` naming the file and the dotted key.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data import load_npz, load_text, regression_curve
from ..registry import CALLBACKS, DATA_KINDS, LOSSES, OPTIMIZERS, SCHEDULERS, ClassPathError
from ..registry import resolve_class as resolve_registered
from ..trainer import DEFAULT_OPTIMIZER, Trainer
from ..training.precision import PRECISIONS, cpu_refusal
from ..training.strategy import STRATEGIES
from .arguments import callback_reference, callback_spec
from .settings import (
    ConfigError,
    SettingError,
    apply_override,
    check_choice,
    default_of,
    is_section,
    read_yaml,
    read_yaml_file,
    reference_table,
    resolve_section,
    section,
    setting,
    yaml_lines,
)

__all__ = [
    "ConfigError",
    "DataSection",
    "ModelSection",
    "OptimizerSection",
    "RunConfig",
    "SchedulerSection",
    "SettingError",
    "TrainerSection",
    "callback_spec",
    "class_error",
    "default_of",
    "dump",
    "load",
    "portable",
    "read_yaml",
    "reference",
    "resolve_class",
    "saved_form",
    "section",
    "setting",
]


# ------------------------------------------------------------------------------------------------------ sections
@dataclass(kw_only=True)
class ModelSection:
    """``model``: the class to train and its arguments."""

    class_path: str = setting(
        help="the model class, e.g. model.py:Net (a file relative to the config's folder) or package.module.Class"
    )
    init_args: dict = setting({}, "keyword arguments of the model class")


@dataclass(kw_only=True)
class DataSection:
    """``data``: a kind of ``trainkit.registry.DATA_KINDS`` and the keys its loader takes.

    ``kind: text`` (``trainkit.data.load_text``) is for language models: a UTF-8 file cut into characters (``level:
    char``) or whitespace-separated words (``level: word``), samples of ``block_size`` token ids with the next ids as
    targets (inputs ``x[i:i+block_size]``, targets ``x[i+1:i+block_size+1]``, a sample every ``stride`` tokens). The
    last ``test_split`` and, before it, ``validation_split`` share of the text are held out by position, no sample
    reaching across. The vocabulary is built from the training part (word level: ``<unk>`` first, for the held-out words
    it lacks; characters only the held-out part has are added, with a warning) and saved as ``vocab.json`` in the run
    folder, which ``trainkit evaluate`` and a resumed run use. The model gets ``vocab_size`` and ``block_size`` from the
    data when its class takes them and ``model.init_args`` leaves them out. It returns logits (N, T, V) for inputs (N,
    T); the loss is applied to them flattened to (N*T, V) against targets (N*T,) (``trainkit.cli.run.TokenLoss``), as
    one writes ``F.cross_entropy(logits.view(-1, V), y.view(-1))`` in PyTorch. ``metrics: [perplexity]`` logs
    ``perplexity`` and ``val_perplexity`` (exp of the mean cross-entropy). A file that is missing, not UTF-8, empty,
    larger than ``max_mb`` or too short for one sample is refused naming the key and the file.
    """

    kind: str = setting("regression_curve", "where the samples come from", choices=DATA_KINDS)
    path: str | None = setting(
        None, "the .npz, .csv or UTF-8 text file (relative to the config's folder), for kinds npz, csv, text"
    )
    inputs: str | list | None = setting(
        None,
        f"npz: the input array (null: {default_of(load_npz, 'inputs')}); csv: the input columns, e.g. [a, b] "
        "(required)",
    )
    targets: str | list | None = setting(
        None,
        f"npz: the target array (null: {default_of(load_npz, 'targets')}); csv: the target columns, e.g. label "
        "(required)",
    )
    task: str | None = setting(
        None,
        "npz, csv: classification (int64 class labels) or regression (float targets); "
        "null: from the loss (cross_entropy and nll mean classification)",
        choices=("classification", "regression"),
    )
    n: int = setting(default_of(regression_curve, "n"), "regression_curve: the number of points", ge=1)
    noise: float = setting(
        default_of(regression_curve, "noise"), "regression_curve: the noise's standard deviation", ge=0
    )
    seed: int = setting(
        0, "regression_curve: the seed of the noise (regression_curve itself, without one, draws new noise each run)"
    )
    validation_split: float = setting(
        default_of(Trainer.fit, "validation_split"),
        "the share of samples held out for validation (the last ones before the test share), as Keras takes it",
        ge=0,
        lt=1,
    )
    test_split: float = setting(
        0.0,
        "the share of samples held out for testing (the last ones), never trained or "
        "validated on: trainkit evaluate --split test",
        ge=0,
        lt=1,
    )
    level: str = setting(
        default_of(load_text, "level"),
        "text: the tokens, each character or each whitespace-separated word",
        choices=("char", "word"),
    )
    block_size: int = setting(
        default_of(load_text, "block_size"),
        "text: tokens per sample; the targets are the next token of each (the model's context length)",
        ge=1,
    )
    stride: int | None = setting(
        None,
        "text: tokens from one sample's start to the next; null: block_size (each token is a target once per epoch)",
        ge=1,
    )
    vocabulary: str | None = setting(
        None,
        "text: a saved vocabulary (a run's vocab.json, relative to the config's "
        "folder) instead of one built from the training part",
    )
    max_mb: float | None = setting(
        default_of(load_text, "max_mb"),
        "text: refuse a file larger than this many megabytes (it is held in memory); null: no limit",
        gt=0,
    )
    class_path: str | None = setting(None, "kind class_path: a function or class returning a Dataset")
    init_args: dict = setting({}, "kind class_path: its keyword arguments")

    def check(self) -> None:
        for key, what in KIND_REQUIRES.get(self.kind, {}).items():
            if getattr(self, key) is None:
                raise SettingError(key, f"is required for data.kind {self.kind}: {what}")
        for key, default in KIND_DEFAULTS.get(self.kind, {}).items():
            if getattr(self, key) is None:  # null means the loader's own default: written out, so it shows
                setattr(self, key, default)
        if self.validation_split + self.test_split >= 1:
            raise SettingError(
                "test_split",
                f"and validation_split ({self.validation_split}) leave nothing to train "
                f"on: together they must stay below 1, got {self.test_split}",
            )


@dataclass(kw_only=True)
class OptimizerSection:
    """``optimizer``: a name of ``trainkit.registry.OPTIMIZERS`` (or a class_path), its lr and other options.

    A section without ``lr`` means the optimizer's own default lr (SGD: 1e-3, as in torch); a config without the
    section trains with the Trainer's ``DEFAULT_OPTIMIZER`` (``RunConfig.optimizer``'s ``absent``).
    """

    name: str | None = setting(DEFAULT_OPTIMIZER["name"], "an optimizer of trainkit.optim", choices=OPTIMIZERS)
    class_path: str | None = setting(None, "your own optimizer class instead of a name, e.g. opt.py:MyOptimizer")
    lr: float | None = setting(None, "the learning rate; null: the optimizer's default", ge=0)
    options: dict | None = setting({}, "its other keyword arguments, e.g. {momentum: 0.9}")

    def check(self) -> None:
        if self.class_path is not None:
            self.name = None  # the class named by class_path is the one used
        elif self.name is None:
            raise SettingError("name", "is required without optimizer.class_path")
        elif self.lr is None:  # the optimizer's own default, shown by --print-config
            lr = inspect.signature(OPTIMIZERS.get(self.name)).parameters.get("lr")
            self.lr = None if lr is None or lr.default is inspect.Parameter.empty else lr.default
        self.options = self.options or {}


@dataclass(kw_only=True)
class SchedulerSection:
    """``scheduler``: a name of ``trainkit.registry.SCHEDULERS`` and its options; no name, no scheduler."""

    name: str | None = setting(None, "a scheduler of trainkit.optim.lr_scheduler; null: none", choices=SCHEDULERS)
    options: dict | None = setting({}, "its keyword arguments, e.g. {step_size: 30}")
    interval: str = setting(
        "epoch",
        "when it steps: epoch (at each epoch's end) or step (after each optimizer step, as OneCycleLR expects)",
        choices=("epoch", "step"),
    )

    def check(self) -> None:
        if self.options and self.name is None:
            raise SettingError("name", "is required with scheduler.options")
        self.options = self.options or {}


@dataclass(kw_only=True)
class TrainerSection:
    """Keys the Trainer takes go to ``Trainer(...)``, those ``Trainer.fit`` takes to ``fit`` (by name)."""

    epochs: int = setting(default_of(Trainer.fit, "epochs"), "the number of epochs", ge=1)
    batch_size: int = setting(default_of(Trainer.fit, "batch_size"), "samples per batch", ge=1)
    shuffle: bool = setting(default_of(Trainer.fit, "shuffle"), "shuffle the training samples every epoch")
    device: str = setting(default_of(Trainer, "device"), "cpu, cuda or cuda:N")
    seed: int = setting(0, "the seed of the weights, the batch order and dropout")
    grad_clip_norm: float | None = setting(
        default_of(Trainer, "grad_clip_norm"), "clip the gradients' global norm to this; null: no clipping", gt=0
    )
    accumulate_steps: int = setting(default_of(Trainer, "accumulate_steps"), "batches per optimizer step", ge=1)
    verbose: bool | int | str = setting(
        default_of(Trainer, "verbose"),
        "as Keras' fit(verbose=): 0 silent, 1 a progress bar, 2 one line per epoch, auto 1 on a terminal and 2 "
        "elsewhere (true means auto, false 0)",
        choices=(0, 1, 2, "auto"),
    )
    strategy: str = setting(
        default_of(Trainer, "strategy"), "auto: ddp when launched on several processes", choices=STRATEGIES
    )
    terminate_on_nan: bool = setting(
        True,
        "stop at the first NaN or infinite batch loss; the command then exits 3 "
        "and the last good checkpoint stays (the Trainer's own default is false)",
    )
    collective_timeout_s: float | None = setting(
        default_of(Trainer, "collective_timeout_s"),
        "ddp: abort the job when a collective waits longer than this for a stuck or lost rank; null: wait for ever",
        gt=0,
    )
    bucket_cap_mb: float = setting(
        default_of(Trainer, "bucket_cap_mb"), "ddp: the size of the gradient buckets averaged together", gt=0
    )
    precision: int | str = setting(
        default_of(Trainer, "precision"),
        "as Lightning's: 32-true; bf16-mixed: forward and loss under bfloat16 autocast, float32 weights and steps; "
        "16-mixed: float16 autocast with loss scaling (GPU only); bf16-true, 16-true, 64-true: the model in that "
        "dtype",
        choices=PRECISIONS,
    )
    compile: bool = setting(
        default_of(Trainer, "compile"), "replay each batch's forward as captured array kernels (trainkit.compile)"
    )

    def check(self) -> None:
        refusal = cpu_refusal(self.precision, "cuda" if self.device.startswith("cuda") else "cpu")
        if refusal is not None:
            raise SettingError("precision", f"is {self.precision!r}: {refusal}")


@dataclass(kw_only=True)
class RunConfig:
    """A whole config: its top-level keys and its sections, in the order ``dump`` writes them.

    ``load`` returns one, complete (every section an instance of its dataclass, every key set) and with ``file``, the
    config file it came from, and ``folder``, that file's folder (absolute; ``class_path`` files, ``data.path`` and
    ``data.vocabulary`` are relative to it). Neither is a key of the config: ``dump`` and ``saved_form`` leave them
    out, and a config made in Python has ``file`` None and ``folder`` the working directory.

    >>> config = load("configs/regression.yaml")  # doctest: +SKIP
    >>> config.trainer.epochs, config.file, config.folder  # doctest: +SKIP
    (200, PosixPath('configs/regression.yaml'), PosixPath('/work/main/configs'))
    """

    name: str | None = setting(None, "the run's name, its folder output_dir/name; null: the config file's name")
    output_dir: str = setting(
        "runs",
        "where run folders go; a relative one is the working directory's (where trainkit runs), not the config's",
    )
    model: ModelSection = section("the model to train")
    data: DataSection = section("the samples")
    optimizer: OptimizerSection = section("the optimizer (name or class_path)", absent=DEFAULT_OPTIMIZER)
    scheduler: SchedulerSection = section("the learning-rate scheduler")
    loss: str | dict = setting(
        default_of(Trainer, "loss"), "a loss name, or {name: ..., its keyword arguments}", choices=LOSSES
    )
    metrics: list = setting([], "metric names, e.g. [mae] or [accuracy]")
    freeze: list = setting([], "names of sub-modules whose parameters are not trained")
    trainer: TrainerSection = section("how to train")
    callbacks: list = setting(
        [],
        "callback names, or {name: ..., its keyword arguments} or {class_path: ..., its keyword arguments}; the "
        "arguments inline or under init_args",
    )

    def __post_init__(self) -> None:
        self.file: Path | None = None  # set by load; attributes, not keys: no dataclass field
        self.folder: Path = Path.cwd()

    def check(self) -> None:
        if self.name is not None and (
            not self.name or Path(self.name).name != self.name or self.name in ("..", ".") or "\\" in self.name
        ):
            raise SettingError(
                "name",
                f"must be one folder name (no '/', '..' or '.'), got {self.name!r}: the run "
                "folder is output_dir/name; point output_dir elsewhere to write elsewhere",
            )
        if isinstance(self.loss, dict):
            if "name" not in self.loss:
                raise SettingError("loss.name", "is required when loss is a mapping")
            check_choice(self.loss["name"], LOSSES, "loss.name")
        self.callbacks = [callback_spec(spec, i) for i, spec in enumerate(self.callbacks)]


# What a data kind cannot do without (csv: the loader would read no targets, yet training needs them), each with what
# to write, and the defaults of its loader for keys left null, written into the loaded config so --print-config shows
# them.
KIND_REQUIRES: dict[str, dict[str, str]] = {
    "npz": {"path": "the .npz file, relative to the config's folder"},
    "csv": {
        "path": "the .csv file, relative to the config's folder",
        "inputs": "the input columns, e.g. inputs: [a, b]",
        "targets": "the target columns, e.g. targets: label",
    },
    "text": {"path": "the UTF-8 text file, relative to the config's folder"},
    "class_path": {"class_path": "a Dataset class or a @dataset_factory function, e.g. class_path: data.py:make"},
}
KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "npz": {"inputs": default_of(load_npz, "inputs"), "targets": default_of(load_npz, "targets")},
}


# ------------------------------------------------------------------------------------------------------ loading
def load(path: str | Path, overrides: list[str] = ()) -> RunConfig:
    """Read a config, apply ``overrides`` (``--set key.path=value``), check it; returns it complete as a
    ``RunConfig`` (every key, defaults filled in; ``name`` the file's stem when not given), ``file`` and ``folder`` set.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    >>> _ = p.write_text("model: {class_path: trainkit.nn.Identity}\\ntrainer: {epoch: 3}\\n")
    >>> try:
    ...     load(p)
    ... except ConfigError as err:
    ...     print(str(err).split(": ", 1)[1])
    unknown key 'trainer.epoch'; did you mean 'epochs'?
    >>> config = load(p, ["trainer={epochs: 3}"])
    >>> config.trainer.batch_size, config.name, config.file == p
    (32, 'c', True)
    """
    file = Path(path)
    raw = read_yaml_file(file) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: a config is a mapping of sections, got {type(raw).__name__}")
    for assignment in overrides:
        apply_override(raw, assignment, file)
    config = resolve_section(RunConfig, raw, "", file)
    if config.name is None:
        config.name = file.stem
    config.file, config.folder = file, file.resolve().parent
    return config


def saved_form(config: RunConfig) -> dict:
    """The config as plain mappings, as it is written into the run folder (its keys only: no ``file``/``folder``).

    >>> saved_form(RunConfig(name="r", output_dir="runs"))["name"]
    'r'
    """
    return dataclasses.asdict(config)


def portable(config: RunConfig) -> RunConfig:
    """A copy of ``config`` that loads the same from any folder: the files it reads (``file.py:Class`` class paths,
    ``data.path``, ``data.vocabulary``), relative to the config's folder, made absolute. ``output_dir`` stays as
    given: a relative one belongs to the working directory, wherever the config file is.

    >>> config = RunConfig(model=ModelSection(class_path="m.py:Net"), data=DataSection(path="d.npz"),
    ...                    callbacks=[{"class_path": "cb.py:Quiet"}, {"class_path": "pkg.cb.Loud"}])
    >>> config.folder = Path("/work/configs")
    >>> c = portable(config)
    >>> c.model.class_path, c.data.path, c.callbacks, c.output_dir
    ('/work/configs/m.py:Net', '/work/configs/d.npz', [{'class_path': '/work/configs/cb.py:Quiet'}, \
{'class_path': 'pkg.cb.Loud'}], 'runs')
    """
    out = copy.deepcopy(config)
    here = Path(config.folder)

    def absolute(spec: Any) -> Any:  # file.py:Class is the config folder's; package.module.Class is Python's
        if not isinstance(spec, str) or ":" not in spec:
            return spec
        file, _, name = spec.partition(":")
        return f"{(here / file).resolve()}:{name}"

    for part in (out.model, out.optimizer, out.data):
        if part is not None and part.class_path is not None:
            part.class_path = absolute(part.class_path)
    if out.data is not None:
        for key in ("path", "vocabulary"):
            if isinstance(getattr(out.data, key), str):
                setattr(out.data, key, str((here / getattr(out.data, key)).resolve()))
    for spec in out.callbacks:
        if isinstance(spec, dict) and "class_path" in spec:
            spec["class_path"] = absolute(spec["class_path"])
    return out


# The first lines of a dumped config: what makes it load from anywhere, and where a run of it writes.
DUMP_HEADER = (
    "# The files this config reads (class_path files, data.path, data.vocabulary) are absolute: it loads from any "
    "folder.",
    "# A relative output_dir is the working directory's: a run of this file writes output_dir/name where it is run.",
)


def dump(config: RunConfig | dict) -> str:
    """The config as YAML with every key's help as a comment; ``load`` reads it back. A ``RunConfig`` is written
    ``portable`` (the files it reads absolute) under ``DUMP_HEADER``, which says so; a mapping of keys as it is.

    >>> print(dump({"output_dir": "runs", "trainer": {"epochs": 3}}))
    output_dir: runs  # where run folders go; a relative one is the working directory's (where trainkit runs), not \
the config's
    trainer:  # how to train
      epochs: 3  # the number of epochs
    <BLANKLINE>
    """
    if isinstance(config, RunConfig):
        return "\n".join([*DUMP_HEADER, *yaml_lines(RunConfig, saved_form(portable(config)))]) + "\n"
    return "\n".join(yaml_lines(RunConfig, config)) + "\n"


def class_error(file: str | Path, key: str, spec: str, err: ImportError) -> ConfigError:
    """The ``ConfigError`` for a ``class_path`` that ``trainkit.registry.resolve_class`` could not load.

    >>> str(class_error("c.yaml", "model.class_path", "m.py:Net", ImportError("no file /m.py", path="/m.py")))
    "c.yaml: 'model.class_path': no file /m.py"
    """
    if err.path is not None and err.name is None:  # the file itself is missing: the path says it all
        return ConfigError(f"{file}: '{key}': {err}")
    return ConfigError(f"{file}: '{key}': cannot load {spec!r}: {err}")


def resolve_class(spec: str, base_dir: str | Path, file: str | Path, key: str) -> Any:
    """``package.module.Class`` or ``path/to/file.py:Class`` (relative to the config's folder) -> the class.

    ``trainkit.registry.resolve_class`` with a ``ConfigError`` naming the config file and the key; what it names
    must be of the kind the key is for (a Module for ``model.class_path``, a Callback for ``callbacks[i]``, ...).

    >>> resolve_class("trainkit.nn.Linear", ".", "c.yaml", "model.class_path").__name__
    'Linear'
    >>> resolve_class("trainkit.nn.Linaer", ".", "c.yaml", "model.class_path")
    Traceback (most recent call last):
    ...
    trainkit.cli.settings.ConfigError: c.yaml: 'model.class_path': cannot load 'trainkit.nn.Linaer': module ...
    """
    try:
        return resolve_registered(spec, base_dir, key.partition(".")[0].partition("[")[0])
    except ClassPathError as err:
        raise class_error(file, key, spec, err) from None


# ------------------------------------------------------------------------------------------------- the reference
# What a callback's docstring cannot say: how a config uses it.
CALLBACK_NOTES = {
    "TextSample": 'In a config (for language models): `{name: TextSample, prompt: "ROMEO:\\n", length: 200, '
    "temperature: 0.8, top_k: 20, every: 1, seed: 0}`; it appends each sample to the run folder's samples.txt and "
    "decodes with the run's vocab.json.",
}


def reference() -> str:
    """docs/config.md: every key of every section, with its type, default, allowed values and help, read off the
    declarations above (``python -m trainkit.cli.config`` prints it; a test keeps the page in sync).

    >>> print(reference().splitlines()[0])
    # Config reference
    """
    lines = [
        "# Config reference",
        "",
        "Every key a run config may hold, read off the declarations in `trainkit/cli/config.py` (regenerate "
        "this page with `python -m trainkit.cli.config > docs/config.md`). `trainkit train CONFIG --print-config` "
        "shows a config with every default filled in. Numbers may be written as `1e-3`.",
        "",
        "A config names code: `class_path` keys import a module or run a Python file, so trust a config as "
        "you would trust that code. Each `class_path` may name only code of the kind its key is for: a "
        "`Module` subclass for `model`, a `Dataset` subclass or a function marked with "
        "`@trainkit.registry.dataset_factory` for `data`, an `Optimizer` subclass for `optimizer`, a "
        "`Callback` subclass in `callbacks`; anything else (`os.system`, `subprocess.run`) is refused before "
        "it is called.",
        "",
    ]
    lines.extend(
        [
            "## Paths",
            "",
            "Files a config reads are relative to the config's folder: `file.py:Class` class paths (`model`, "
            "`data`, `optimizer`, `callbacks`), `data.path` and `data.vocabulary`. A `package.module.Class` class "
            "path is imported from the Python path, which does not hold the config's folder: a file beside the "
            "config is written `file.py:Class`. What the run writes goes under `output_dir`, and a relative "
            "`output_dir` is relative to the working directory, the folder `trainkit` is run from, never to the "
            "config's: `trainkit train configs/regression.yaml` run from the project writes "
            "`runs/regression/version_N` there. Keyword arguments (`init_args`, a callback's arguments, "
            "`optimizer.options`) are passed to the code as written; a path among them is that code's to resolve "
            "(`CSVLogger`, `PlotCallback` and `TensorBoard` place a relative one in the run folder).",
            "",
            "`trainkit train CONFIG --print-config` prints the config with the files it reads made absolute, under "
            "a comment saying so, and keeps `output_dir` as given: saved anywhere, the printed config loads as the "
            "original did, and a run of it writes under the folder it is run from. The run folder's `config.yaml` "
            "is written the same way, so `trainkit train runs/NAME/version_N/config.yaml` reruns a run from any "
            "folder.",
            "",
            "## Top level",
            "",
        ]
    )
    lines.extend(reference_table(RunConfig, ""))
    lines.extend(
        [
            "Metric names (`metrics`): `mae`, `mse`, `rmse`, `accuracy`, `topK_accuracy` (`top5_accuracy`), "
            "`perplexity`.",
            "",
        ]
    )
    lines.extend(callback_reference(CALLBACKS, CALLBACK_NOTES))
    hints = typing.get_type_hints(RunConfig)
    for f in dataclasses.fields(RunConfig):
        if is_section(hints[f.name]):
            cls = hints[f.name]
            lines.extend([f"## `{f.name}`: {f.metadata['help']}", "", inspect.cleandoc(cls.__doc__ or ""), ""])
            if cls is DataSection:
                lines.extend([_kind_keys(), ""])
            lines.extend(reference_table(cls, f"{f.name}."))
    return "\n".join(lines).replace("``", "`")


def _kind_keys() -> str:
    """The sentence of the reference that says which keys each data kind requires and which it fills in."""
    parts = []
    for kind in DATA_KINDS:
        required = ", ".join(f"`{key}`" for key in KIND_REQUIRES.get(kind, {}))
        defaults = ", ".join(f"`{k}` (`{v}`)" for k, v in KIND_DEFAULTS.get(kind, {}).items())
        text = f"`{kind}` " + (f"requires {required}" if required else "requires no key")
        parts.append(text + (f" and defaults {defaults}" if defaults else ""))
    return (
        "Keys by kind: " + "; ".join(parts) + ". A required key left out is a config error naming it, in "
        "`trainkit check` too; a null that has a default is written out with it, so `--print-config` shows what "
        "the loader reads. Keys of other kinds are ignored."
    )


if __name__ == "__main__":
    print(reference())
