"""Run configs: YAML files read with ``yaml.safe_load``, checked in full before anything trains.

Every mistake is reported as a ``ConfigError`` that names the file, the dotted key and, for a misspelt key, the
nearest valid one. ``build`` turns a checked config into the objects a run needs.
"""

from __future__ import annotations

import copy
import difflib
import importlib
import importlib.util
import sys
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """A problem in a run config: the message names the file and the key."""


# What each section may hold: key -> the types its value may have (None marks free-form options passed on as
# keyword arguments: they are checked by the class that receives them).
SCHEMA: dict = {
    "name": (str,),
    "output_dir": (str,),
    "model": {"class_path": (str,), "init_args": (dict,)},
    "data": {
        "kind": (str,), "path": (str,), "inputs": (str, list), "targets": (str, list), "n": (int,),
        "noise": (int, float), "seed": (int,), "validation_split": (int, float), "class_path": (str,),
        "init_args": (dict,),
    },
    "optimizer": {"name": (str,), "class_path": (str,), "lr": (int, float), "options": None},
    "scheduler": {"name": (str,), "options": None},
    "loss": (str, dict),
    "metrics": (list,),
    "trainer": {
        "epochs": (int,), "batch_size": (int,), "device": (str,), "seed": (int,), "grad_clip_norm": (int, float),
        "accumulate_steps": (int,), "shuffle": (bool,), "verbose": (bool,), "strategy": (str,),
        "bucket_cap_mb": (int, float),
    },
    "freeze": (list,),
    "callbacks": (list,),
}

STRATEGIES = ("auto", "ddp", "single_device")
DATA_KINDS = ("regression_curve", "npz", "csv", "class_path")
OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop")
SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "ReduceLROnPlateau")


def _type_names(types) -> str:
    return " or ".join({"str": "a string", "int": "an integer", "float": "a number", "bool": "true/false",
                        "list": "a list", "dict": "a mapping"}[t.__name__] for t in types)


def _check(section: dict, schema: dict, where: str, file: Path) -> None:
    for key, value in section.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in schema:
            near = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else f"; valid keys: {', '.join(schema)}"
            raise ConfigError(f"{file}: unknown key '{path}'{hint}")
        rule = schema[key]
        if rule is None:
            continue
        if isinstance(rule, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{file}: '{path}' must be a mapping of settings, got {type(value).__name__}")
            _check(value, rule, path, file)
        elif not isinstance(value, rule) or (isinstance(value, bool) and bool not in rule):
            raise ConfigError(f"{file}: '{path}' must be {_type_names(rule)}, got {value!r}")


def _set(config: dict, assignment: str, file: Path) -> None:
    """Apply one ``--set key.path=value`` (the value is read as YAML: numbers, booleans, lists work)."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key.path=value, got {assignment!r}")
    node = config
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{file}: --set {key}: '{part}' is not a section")
    node[parts[-1]] = yaml.safe_load(raw)


def load(path: str | Path, overrides: list[str] = ()) -> dict:
    """Read, override and check a config; returns it with defaults filled in and ``_file`` / ``_dir`` set.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    >>> _ = p.write_text("model: {class_path: trainkit.nn.Identity}\\ntrainer: {epoch: 3}\\n")
    >>> try:
    ...     load(p)
    ... except ConfigError as err:
    ...     print(str(err).split(": ", 1)[1])
    unknown key 'trainer.epoch'; did you mean 'epochs'?
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: no such config file")
    try:
        config = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: not valid YAML: {err}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{file}: a config is a mapping of sections, got {type(config).__name__}")
    for assignment in overrides:
        _set(config, assignment, file)
    _check(config, SCHEMA, "", file)
    if "model" not in config or "class_path" not in config["model"]:
        raise ConfigError(f"{file}: 'model.class_path' is required (the model class, e.g. model.py:Net)")
    data = config.setdefault("data", {"kind": "regression_curve"})
    kind = data.setdefault("kind", "regression_curve")
    if kind not in DATA_KINDS:
        near = difflib.get_close_matches(kind, DATA_KINDS, n=1)
        raise ConfigError(f"{file}: 'data.kind' is {kind!r}; use one of {', '.join(DATA_KINDS)}"
                          + (f" (did you mean '{near[0]}'?)" if near else ""))
    if kind in ("npz", "csv") and "path" not in data:
        raise ConfigError(f"{file}: 'data.path' is required for data.kind {kind}")
    split = data.get("validation_split", 0.0)
    if not 0.0 <= split < 1.0:
        raise ConfigError(f"{file}: 'data.validation_split' must be in [0, 1), got {split}")
    optimizer = config.setdefault("optimizer", {"name": "SGD", "lr": 0.01})
    if optimizer.get("name", "SGD") not in OPTIMIZERS and "class_path" not in optimizer:
        name = optimizer.get("name")
        near = difflib.get_close_matches(str(name), OPTIMIZERS, n=1)
        raise ConfigError(f"{file}: 'optimizer.name' is {name!r}; use one of {', '.join(OPTIMIZERS)}"
                          + (f" (did you mean '{near[0]}'?)" if near else ""))
    trainer = config.setdefault("trainer", {})
    for key, low in (("epochs", 1), ("batch_size", 1), ("accumulate_steps", 1)):
        if key in trainer and trainer[key] < low:
            raise ConfigError(f"{file}: 'trainer.{key}' must be at least {low}, got {trainer[key]}")
    if trainer.get("strategy", "auto") not in STRATEGIES:
        raise ConfigError(f"{file}: 'trainer.strategy' must be one of {', '.join(STRATEGIES)}, "
                          f"got {trainer['strategy']!r}")
    if "bucket_cap_mb" in trainer and trainer["bucket_cap_mb"] <= 0:
        raise ConfigError(f"{file}: 'trainer.bucket_cap_mb' must be positive, got {trainer['bucket_cap_mb']}")
    if "scheduler" in config and config["scheduler"].get("name") not in SCHEDULERS:
        raise ConfigError(f"{file}: 'scheduler.name' must be one of {', '.join(SCHEDULERS)}")
    for i, cb in enumerate(config.get("callbacks", [])):
        if not isinstance(cb, (str, dict)) or (isinstance(cb, dict) and "name" not in cb and "class_path" not in cb):
            raise ConfigError(f"{file}: 'callbacks[{i}]' must be a name or a mapping with 'name' or 'class_path'")
    config.setdefault("name", file.stem)
    config.setdefault("output_dir", "runs")
    config["_file"], config["_dir"] = str(file), str(file.resolve().parent)
    return config


def resolve_class(spec: str, base_dir: str | Path, file: str, key: str):
    """``package.module.Class`` or ``path/to/file.py:Class`` (relative to the config's folder) -> the class."""
    try:
        if ":" in spec:
            module_file, _, name = spec.partition(":")
            module_path = (Path(base_dir) / module_file).resolve()
            if not module_path.is_file():
                raise ConfigError(f"{file}: '{key}': no file {module_path}")
            module_name = f"_trainkit_user_{module_path.stem}"
            spec_ = importlib.util.spec_from_file_location(module_name, module_path)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[module_name] = module
            spec_.loader.exec_module(module)
        else:
            module_name, _, name = spec.rpartition(".")
            module = importlib.import_module(module_name)
        return getattr(module, name)
    except ConfigError:
        raise
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"{file}: '{key}': cannot load {spec!r}: {err}") from None


def saved_form(config: dict) -> dict:
    """The resolved config as it is written into the run folder (without the bookkeeping keys)."""
    out = copy.deepcopy(config)
    out.pop("_file", None)
    out.pop("_dir", None)
    return out
