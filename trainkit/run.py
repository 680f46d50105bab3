"""A training run from a checked config: the model, data, optimizer, loss, callbacks and Trainer it describes.

``build`` passes each section's settings on by name: the trainer section's keys go to ``Trainer(...)`` or to
``Trainer.fit`` (whichever takes them), a data kind of ``trainkit.registry.DATA_KINDS`` takes the data keys its
loader takes, and the named optimizer, scheduler, loss and callbacks come from the registries of
``trainkit.registry``. What those raise is reported as a ``ConfigError`` naming the config file and the key.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from .autograd.random import manual_seed
from .config import ConfigError, class_error, resolve_class
from .registry import (
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
from .registry import build as make
from .trainer import Trainer


@dataclass
class Run:
    """What ``build`` returns: a Trainer and what to call ``fit`` with."""

    trainer: Trainer
    dataset: object
    run_dir: Path
    fit_args: dict = field(default_factory=dict)


def _kwargs_error(config: dict, key: str, err: Exception) -> ConfigError:
    return ConfigError(f"{config['_file']}: '{key}': {err}")


# ---------------------------------------------------------------------------------------------------- the parts
def _named(config: dict, registry: Registry, name: str, key: str, **kwargs):
    try:
        return make(registry, name, **kwargs)
    except UnknownNameError as err:  # a config from load() has only known names; a hand-made one may not
        raise ConfigError(f"{config['_file']}: '{key}' names an {err}") from None
    except (TypeError, ValueError) as err:
        raise _kwargs_error(config, key.rpartition(".name")[0] or key, err) from None


def _optimizer(config: dict, model):
    spec = config["optimizer"]
    kwargs = {"lr": spec["lr"]} if spec["lr"] is not None else {}
    kwargs.update(spec["options"] or {})
    if spec["class_path"] is None:
        return _named(config, OPTIMIZERS, spec["name"], "optimizer.name", params=model.parameters(), **kwargs)
    cls = resolve_class(spec["class_path"], config["_dir"], config["_file"], "optimizer.class_path")
    try:
        return cls(model.parameters(), **kwargs)
    except (TypeError, ValueError) as err:
        raise _kwargs_error(config, "optimizer", err) from None


def _dataset(config: dict):
    spec = config["data"]
    try:
        make_dataset = DATA_KINDS.get(spec["kind"])
    except UnknownNameError as err:  # a config from load() has only known kinds; a hand-made one may not
        raise ConfigError(f"{config['_file']}: 'data.kind' names an {err}") from None
    try:
        return make_dataset(spec, Path(config["_dir"]))
    except ClassPathError as err:
        raise class_error(config["_file"], "data.class_path", spec["class_path"], err) from None
    except TypeError as err:  # keys that do not fit the loader (init_args for the class_path kind)
        raise _kwargs_error(config, "data.init_args" if spec["kind"] == "class_path" else "data", err) from None
    except KeyError as err:  # a missing array or column of a file; what a user's own dataset raises is its own
        if spec["kind"] == "class_path":
            raise
        raise _kwargs_error(config, "data", err) from None


def _loss(config: dict):
    spec = config["loss"]
    if isinstance(spec, str):
        return _named(config, LOSSES, spec, "loss")
    options = {k: v for k, v in spec.items() if k != "name"}
    return _named(config, LOSSES, spec["name"], "loss.name", **options)


def _callback(config: dict, i: int, spec):
    if isinstance(spec, str):
        spec = {"name": spec}
    options = {k: v for k, v in spec.items() if k not in ("name", "class_path")}
    if "class_path" not in spec:
        return _named(config, CALLBACKS, spec["name"], f"callbacks[{i}].name", **options)
    cls = resolve_class(spec["class_path"], config["_dir"], config["_file"], f"callbacks[{i}].class_path")
    try:
        return cls(**options)
    except TypeError as err:
        raise _kwargs_error(config, f"callbacks[{i}]", err) from None


def _takes(func, key: str) -> bool:
    params = inspect.signature(func).parameters
    return key in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _trainer_and_fit_settings(settings: dict) -> tuple[dict, dict]:
    """Split the trainer section by name: what ``Trainer.fit`` names goes to fit, the rest to ``Trainer(...)``."""
    fit_names = inspect.signature(Trainer.fit).parameters
    to_fit = {k: v for k, v in settings.items() if k in fit_names}
    to_trainer = {k: v for k, v in settings.items() if k not in to_fit}
    for key in to_trainer:
        if not _takes(Trainer, key):
            raise TypeError(f"trainer.{key} is declared in trainkit.config but neither Trainer nor Trainer.fit "
                            "takes it")
    return to_trainer, to_fit


def build(config: dict) -> Run:
    """Make everything ``config`` describes (a checked config from ``trainkit.config.load``).

    >>> from trainkit.config import load
    >>> run = build(load("configs/regression.yaml", ["trainer.verbose=false"]))  # doctest: +SKIP
    >>> run.fit_args  # doctest: +SKIP
    {'epochs': 200, 'batch_size': 10, 'shuffle': True, 'validation_split': 0.0}
    """
    file = config["_file"]
    trainer_args, fit_args = _trainer_and_fit_settings(config["trainer"])
    manual_seed(trainer_args["seed"])  # before the model: its initial weights come from this seed
    model_cls = resolve_class(config["model"]["class_path"], config["_dir"], file, "model.class_path")
    try:
        model = model_cls(**config["model"]["init_args"])
    except TypeError as err:
        raise _kwargs_error(config, "model.init_args", err) from None
    model.to(trainer_args["device"])
    optimizer = _optimizer(config, model)
    scheduler = None
    if config["scheduler"]["name"] is not None:
        scheduler = _named(config, SCHEDULERS, config["scheduler"]["name"], "scheduler.name", optimizer=optimizer,
                           **config["scheduler"]["options"])

    run_dir = Path(config["output_dir"]) / config["name"]
    callbacks = [_callback(config, i, spec) for i, spec in enumerate(config["callbacks"])]
    given = {type(c).__name__ for c in callbacks}
    monitor = "val_loss" if config["data"]["validation_split"] else "loss"
    # paths relative to the run folder; the Trainer writes last.npz itself
    defaults = [("ProgressBar", {}), ("CSVLogger", {"filename": "metrics.csv"}),
                ("ModelCheckpoint", {"monitor": monitor, "save_last": False})]
    for name, kwargs in defaults:
        if name not in given and (trainer_args["verbose"] or name != "ProgressBar"):
            callbacks.append(make(CALLBACKS, name, **kwargs))
    try:
        trainer = Trainer(model, optimizer, _loss(config), config["metrics"], callbacks, scheduler=scheduler,
                          freeze=config["freeze"], run_dir=run_dir, **trainer_args)
    except ValueError as err:
        raise ConfigError(f"{file}: {err}") from None
    fit_args.update(by_name(config["data"], Trainer.fit))  # validation_split
    return Run(trainer, _dataset(config), run_dir, fit_args)
