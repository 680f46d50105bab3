"""A training run from a checked config: the model, data, optimizer, loss, callbacks and Trainer it describes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import callbacks as callback_module
from . import optim
from .autograd.random import manual_seed
from .config import ConfigError, resolve_class
from .optim import lr_scheduler
from .trainer import Trainer


@dataclass
class Run:
    """What ``build`` returns: a Trainer and what to call ``fit`` with."""

    trainer: Trainer
    dataset: object
    run_dir: Path
    fit_args: dict = field(default_factory=dict)


def _kwargs_error(config: dict, key: str, err: TypeError) -> ConfigError:
    return ConfigError(f"{config['_file']}: '{key}': {err}")


def _dataset(config: dict):
    from . import data

    spec, file = config["data"], config["_file"]
    kind = spec["kind"]
    if kind == "regression_curve":
        return data.regression_curve(n=spec.get("n", 100), noise=spec.get("noise", 0.1), seed=spec.get("seed", 0))
    if kind in ("npz", "csv"):
        path = Path(config["_dir"]) / spec["path"]
        try:
            if kind == "npz":
                return data.load_npz(path, inputs=spec.get("inputs", "x"), targets=spec.get("targets", "y"))
            return data.load_csv(path, inputs=spec["inputs"], targets=spec["targets"])
        except KeyError as err:
            raise ConfigError(f"{file}: 'data': {err}") from None
    cls = resolve_class(spec["class_path"], config["_dir"], file, "data.class_path")
    try:
        return cls(**spec.get("init_args", {}))
    except TypeError as err:
        raise _kwargs_error(config, "data.init_args", err) from None


def _callback(config: dict, i: int, spec):
    file = config["_file"]
    if isinstance(spec, str):
        spec = {"name": spec}
    spec = dict(spec)
    if "class_path" in spec:
        cls = resolve_class(spec.pop("class_path"), config["_dir"], file, f"callbacks[{i}].class_path")
    else:
        name = spec.pop("name")
        cls = getattr(callback_module, name, None)
        if cls is None or not isinstance(cls, type):
            names = [n for n in callback_module.__all__ if n not in ("Callback", "CallbackList")]
            raise ConfigError(
                f"{file}: 'callbacks[{i}].name': unknown callback {name!r}; use one of {', '.join(names)}"
            )
    try:
        return cls(**spec)
    except TypeError as err:
        raise _kwargs_error(config, f"callbacks[{i}]", err) from None


def build(config: dict) -> Run:
    """Make everything ``config`` describes (a checked config from ``trainkit.config.load``)."""
    file = config["_file"]
    settings = config["trainer"]
    seed = settings.get("seed", 0)
    manual_seed(seed)
    model_cls = resolve_class(config["model"]["class_path"], config["_dir"], file, "model.class_path")
    try:
        model = model_cls(**config["model"].get("init_args", {}))
    except TypeError as err:
        raise _kwargs_error(config, "model.init_args", err) from None
    device = settings.get("device", "cpu")
    model.to(device)

    opt_spec = dict(config["optimizer"])
    opt_cls = (resolve_class(opt_spec.pop("class_path"), config["_dir"], file, "optimizer.class_path")
               if "class_path" in opt_spec else getattr(optim, opt_spec.pop("name", "SGD")))
    opt_spec.pop("name", None)
    options = opt_spec.pop("options", {}) or {}
    try:
        optimizer = opt_cls(model.parameters(), **opt_spec, **options)
    except (TypeError, ValueError) as err:
        raise _kwargs_error(config, "optimizer", err) from None

    scheduler = None
    if "scheduler" in config:
        sched = config["scheduler"]
        try:
            scheduler = getattr(lr_scheduler, sched["name"])(optimizer, **(sched.get("options") or {}))
        except (TypeError, ValueError) as err:
            raise _kwargs_error(config, "scheduler", err) from None

    loss = config.get("loss", "mse")
    if isinstance(loss, dict):
        loss = dict(loss)
        from .trainer import _LOSSES

        name = loss.pop("name", None)
        if name not in _LOSSES:
            raise ConfigError(f"{file}: 'loss.name' must be one of {', '.join(sorted(_LOSSES))}, got {name!r}")
        try:
            loss = _LOSSES[name](**loss)
        except TypeError as err:
            raise _kwargs_error(config, "loss", err) from None

    run_dir = Path(config["output_dir"]) / config["name"]
    verbose = settings.get("verbose", True)
    callbacks = [_callback(config, i, spec) for i, spec in enumerate(config.get("callbacks", []))]
    given = {type(c).__name__ for c in callbacks}
    monitor = "val_loss" if config["data"].get("validation_split") else "loss"
    # paths relative to the run folder
    defaults = [("ProgressBar", {}), ("CSVLogger", {"filename": "metrics.csv"}),
                ("ModelCheckpoint", {"monitor": monitor, "save_last": False})]  # the Trainer writes last.npz
    for name, kwargs in defaults:
        if name not in given and (verbose or name != "ProgressBar"):
            callbacks.append(getattr(callback_module, name)(**kwargs))
    try:
        trainer = Trainer(model, optimizer, loss, config.get("metrics", []), callbacks, device=device, seed=seed,
                          scheduler=scheduler, grad_clip_norm=settings.get("grad_clip_norm"),
                          accumulate_steps=settings.get("accumulate_steps", 1), freeze=config.get("freeze", []),
                          run_dir=run_dir, verbose=verbose, strategy=settings.get("strategy", "auto"),
                          bucket_cap_mb=settings.get("bucket_cap_mb", 25.0))
    except ValueError as err:
        raise ConfigError(f"{file}: {err}") from None
    fit_args = {"epochs": settings.get("epochs", 1), "batch_size": settings.get("batch_size", 32),
                "shuffle": settings.get("shuffle", True),
                "validation_split": config["data"].get("validation_split", 0.0)}
    return Run(trainer, _dataset(config), run_dir, fit_args)
