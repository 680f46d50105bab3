"""The config schema: each key declared once in trainkit.cli.config's section dataclasses, and everything follows
from it.

A key added to a section's declaration is loaded, defaulted, checked and printed; every default appears in
``--print-config`` and what it prints loads again; names of optimizers, schedulers, losses and callbacks come from
the registries, with the nearest one suggested; a bad type or bound names the file and the key.
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainkit.cli import config as cfg
from trainkit.cli import run as run_module
from trainkit.registry import CALLBACKS, DATA_KINDS, LOSSES, OPTIMIZERS, SCHEDULERS
from trainkit.trainer import DEFAULT_OPTIMIZER, Trainer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"
MINIMAL = "model: {class_path: trainkit.nn.Linear, init_args: {in_features: 1, out_features: 1}}\n"


def trainkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit.cli", *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


@pytest.fixture
def minimal(tmp_path) -> Path:
    path = tmp_path / "minimal.yaml"
    path.write_text(MINIMAL)
    return path


def _sections() -> dict[str, type]:
    hints = cfg.typing.get_type_hints(cfg.RunConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(cfg.RunConfig) if dataclasses.is_dataclass(hints[f.name])}


@pytest.fixture
def warmup_key(monkeypatch):
    """The trainer section with one more key, declared as a contributor would: one field."""

    @dataclasses.dataclass(kw_only=True)
    class TrainerSection(cfg.TrainerSection):
        warmup_epochs: int = cfg.setting(2, "epochs of learning-rate warm-up", ge=0)

    monkeypatch.setattr(cfg, "TrainerSection", TrainerSection)
    return "warmup_epochs"


def test_a_declared_key_is_loaded_with_its_default_and_checked(minimal, warmup_key):
    assert getattr(cfg.load(minimal).trainer, warmup_key) == 2
    assert getattr(cfg.load(minimal, [f"trainer.{warmup_key}=5"]).trainer, warmup_key) == 5
    with pytest.raises(cfg.ConfigError, match=rf"minimal.yaml: 'trainer.{warmup_key}' must be at least 0, got -1"):
        cfg.load(minimal, [f"trainer.{warmup_key}=-1"])
    with pytest.raises(cfg.ConfigError, match=rf"'trainer.{warmup_key}' must be an integer, got 'two'"):
        cfg.load(minimal, [f"trainer.{warmup_key}=two"])
    with pytest.raises(cfg.ConfigError, match=rf"unknown key 'trainer.warmup_epoch'; did you mean '{warmup_key}'"):
        cfg.load(minimal, ["trainer.warmup_epoch=1"])
    assert f"  {warmup_key}: 2  # epochs of learning-rate warm-up" in cfg.dump(cfg.load(minimal)).splitlines()


def test_a_declared_trainer_key_reaches_the_trainer_by_name(minimal, warmup_key, monkeypatch):
    seen = {}

    class Trainer(run_module.Trainer):
        def __init__(self, *args, warmup_epochs: int = 0, **kwargs):
            seen["warmup_epochs"] = warmup_epochs
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(run_module, "Trainer", Trainer)
    run = run_module.build(cfg.load(minimal, ["trainer.warmup_epochs=3", "trainer.verbose=false"]))
    assert seen == {"warmup_epochs": 3} and warmup_key not in run.fit_args


def test_every_trainer_key_is_taken_by_the_trainer_or_fit():
    takes = set(inspect.signature(run_module.Trainer).parameters) | set(
        inspect.signature(run_module.Trainer.fit).parameters
    )
    assert {f.name for f in dataclasses.fields(cfg.TrainerSection)} <= takes


def test_defaults_shared_with_the_trainer_come_from_it(minimal):
    loaded = cfg.load(minimal)
    init = inspect.signature(Trainer).parameters
    for key in ("device", "grad_clip_norm", "accumulate_steps", "verbose", "strategy", "bucket_cap_mb"):
        assert getattr(loaded.trainer, key) == init[key].default, key
    fit = inspect.signature(Trainer.fit).parameters
    for key in ("epochs", "batch_size", "shuffle"):
        assert getattr(loaded.trainer, key) == fit[key].default, key
    assert {k: getattr(loaded.optimizer, k) for k in DEFAULT_OPTIMIZER} == DEFAULT_OPTIMIZER
    adam = cfg.load(minimal, ["optimizer={name: Adam}"]).optimizer
    assert adam.lr == inspect.signature(OPTIMIZERS.get("Adam")).parameters["lr"].default


def test_print_config_shows_every_default_and_loads_back(tmp_path):
    result = trainkit("train", CONFIG, "--print-config")
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)
    for name, section in _sections().items():
        assert set(printed[name]) == {f.name for f in dataclasses.fields(section)}, name
    assert set(printed) == {f.name for f in dataclasses.fields(cfg.RunConfig)}
    assert "# the number of epochs" in result.stdout
    assert printed["model"]["class_path"] == f"{ROOT / 'examples' / 'regression' / 'model.py'}:Net"  # absolute
    copy = tmp_path / "printed.yaml"
    copy.write_text(result.stdout)  # saved in another folder, as printed
    again = cfg.load(copy)
    original = cfg.load(CONFIG)
    original.model.class_path = original.model.class_path.replace("../examples", str(ROOT / "examples"))
    assert cfg.saved_form(again) == cfg.saved_form(original)
    check = trainkit("check", copy)
    assert check.returncode == 0 and "OK (Net, 31 parameters, 100 samples; one batch:" in check.stdout


def test_a_minimal_config_resolves_to_every_section(minimal):
    loaded = cfg.load(minimal)
    assert loaded.name == "minimal" and dataclasses.asdict(loaded.scheduler) == {
        "name": None,
        "options": {},
        "interval": "epoch",
    }
    for name, section in _sections().items():
        assert type(getattr(loaded, name)) is section, name
        assert list(dataclasses.asdict(getattr(loaded, name))) == [f.name for f in dataclasses.fields(section)], name


def test_a_loaded_config_knows_its_file_and_folder_without_them_being_keys(minimal):
    loaded = cfg.load(minimal)
    assert isinstance(loaded, cfg.RunConfig)
    assert loaded.file == minimal and loaded.folder == minimal.resolve().parent
    assert "file" not in cfg.saved_form(loaded) and "folder" not in cfg.saved_form(loaded)
    assert cfg.load(minimal) == loaded  # the keys decide equality


@pytest.mark.parametrize(
    "override, key, registry, near",
    [
        ("optimizer.name=Adan", "optimizer.name", OPTIMIZERS, "Adam"),
        ("scheduler.name=StepLr", "scheduler.name", SCHEDULERS, "StepLR"),
        ("loss=cross_entropi", "loss", LOSSES, "cross_entropy"),
        ("loss={name: hubr, delta: 2.0}", "loss.name", LOSSES, "huber"),
        ("callbacks=[EarlyStoping]", "callbacks[0]", CALLBACKS, "EarlyStopping"),
        ("callbacks=[{name: CSVLoger, filename: m.csv}]", "callbacks[0].name", CALLBACKS, "CSVLogger"),
    ],
)
def test_unknown_names_list_the_registry_and_suggest_the_nearest(minimal, override, key, registry, near):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(minimal, [override])
    message = str(err.value)
    assert message.startswith(f"{minimal}: '{key}' names an unknown {registry.kind}")
    assert f"did you mean '{near}'?" in message
    assert all(name in message for name in registry.names())


def test_a_registered_name_is_accepted_without_touching_the_config_module(minimal):
    @OPTIMIZERS.register("MySGD")
    class MySGD(OPTIMIZERS.get("SGD")):
        pass

    try:
        loaded = cfg.load(minimal, ["optimizer.name=MySGD"])
        assert loaded.optimizer.name == "MySGD"
        assert "MySGD" in cfg.dump(loaded)
    finally:
        OPTIMIZERS.unregister("MySGD")


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.batch_size=many", "'trainer.batch_size' must be an integer, got 'many'"),
        ("trainer.verbose=3", "'trainer.verbose' must be one of 0, 1, 2, auto, got 3"),
        ("trainer.verbose=loud", "'trainer.verbose' must be one of 0, 1, 2, auto, got 'loud'"),
        ("trainer.epochs=0", "'trainer.epochs' must be at least 1, got 0"),
        ("trainer.bucket_cap_mb=0", "'trainer.bucket_cap_mb' must be positive, got 0"),
        (
            "trainer.strategy=dpp",
            "'trainer.strategy' must be one of auto, ddp, single_device, got 'dpp'; did you mean 'ddp'?",
        ),
        ("data.validation_split=1.5", "'data.validation_split' must be in [0, 1), got 1.5"),
        (
            "data.kind=regresion_curve",
            "'data.kind' names an unknown data kind 'regresion_curve'; did you mean "
            "'regression_curve'? (known: class_path, csv, npz, regression_curve, text)",
        ),
        ("data.kind=csv", "'data.path' is required for data.kind csv: the .csv file, relative to the config's folder"),
        ("optimizer.lr=fast", "'optimizer.lr' must be a number or null, got 'fast'"),
        ("optimizer.options=3", "'optimizer.options' must be a mapping or null, got 3"),
        ("trainer=3", "'trainer' must be a mapping of settings, got int"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(minimal, override, message):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(minimal, [override])
    assert str(err.value) == f"{minimal}: {message}"


def test_the_model_class_is_required(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("trainer: {epochs: 2}\n")
    with pytest.raises(cfg.ConfigError, match=r"empty.yaml: 'model.class_path' is required \(the model class, e.g."):
        cfg.load(path)


def test_set_reaches_nested_keys(minimal):
    loaded = cfg.load(
        minimal,
        [
            "optimizer.options.momentum=0.9",
            "scheduler.name=StepLR",
            "scheduler.options.step_size=3",
            "trainer.grad_clip_norm=1.5",
        ],
    )
    assert loaded.optimizer.options == {"momentum": 0.9}
    assert dataclasses.asdict(loaded.scheduler) == {"name": "StepLR", "options": {"step_size": 3}, "interval": "epoch"}
    assert loaded.trainer.grad_clip_norm == 1.5
    with pytest.raises(cfg.ConfigError, match=r"--set trainer.epochs.x: 'epochs' is not a section"):
        cfg.load(minimal, ["trainer.epochs=3", "trainer.epochs.x=1"])


def test_set_of_a_nested_key_on_the_command_line():
    result = trainkit(
        "train", CONFIG, "--set", "optimizer.options.momentum=0.9", "--set", "trainer.seed=3", "--print-config"
    )
    assert result.returncode == 0, result.stderr
    printed = yaml.safe_load(result.stdout)
    assert printed["optimizer"]["options"] == {"momentum": 0.9} and printed["trainer"]["seed"] == 3


def test_build_makes_the_named_parts(minimal):
    run = run_module.build(
        cfg.load(
            minimal,
            [
                "trainer.verbose=false",
                "scheduler.name=StepLR",
                "scheduler.options.step_size=2",
                "loss={name: huber}",
                "callbacks=[TerminateOnNaN]",
                "data.validation_split=0.25",
            ],
        )
    )
    assert type(run.trainer.scheduler).__name__ == "StepLR"
    assert type(run.trainer.loss_fn).__name__ == "HuberLoss"
    assert run.trainer.optimizer.param_groups[0]["lr"] == 0.01
    assert run.fit_args == {"epochs": 1, "batch_size": 32, "shuffle": True, "validation_split": 0.25}
    names = [type(c).__name__ for c in run.trainer.callbacks]
    assert names[0] == "TerminateOnNaN" and "ProgressBar" not in names


def test_data_kinds_come_from_one_registry():
    assert cfg.DataSection.__dataclass_fields__["kind"].metadata["choices"] is DATA_KINDS
    assert set(DATA_KINDS.names()) == {"regression_curve", "npz", "csv", "class_path", "text"}


def test_an_optimizer_section_without_lr_uses_that_optimizers_default(minimal, tmp_path):
    sgd_default = inspect.signature(OPTIMIZERS.get("SGD")).parameters["lr"].default
    assert sgd_default == 1e-3 != DEFAULT_OPTIMIZER["lr"]
    path = tmp_path / "sgd.yaml"
    path.write_text(MINIMAL + "optimizer: {name: SGD}\n")
    loaded = cfg.load(path)
    assert loaded.optimizer.lr == sgd_default
    assert f"  lr: {sgd_default}  #" in cfg.dump(loaded)
    run = run_module.build(cfg.load(path, ["trainer.verbose=false"]))
    assert run.trainer.optimizer.param_groups[0]["lr"] == sgd_default


def test_no_optimizer_section_means_the_trainers_default_optimizer(minimal):
    loaded = cfg.load(minimal)
    assert {k: getattr(loaded.optimizer, k) for k in DEFAULT_OPTIMIZER} == DEFAULT_OPTIMIZER
    run = run_module.build(cfg.load(minimal, ["trainer.verbose=false"]))
    assert type(run.trainer.optimizer).__name__ == DEFAULT_OPTIMIZER["name"]
    assert run.trainer.optimizer.param_groups[0]["lr"] == DEFAULT_OPTIMIZER["lr"]
    # a section that only sets options is a section: the lr is the optimizer's own
    assert cfg.load(minimal, ["optimizer.options.momentum=0.9"]).optimizer.lr == 1e-3


def _dataset_config(tmp_path, class_path: str) -> cfg.RunConfig:
    (tmp_path / "data.py").write_text(
        "from trainkit.registry import dataset_factory\n\n"
        "@dataset_factory\ndef needs_a_missing_library():\n    import no_such_library_here  # noqa: F401\n\n"
        "@dataset_factory\ndef loses_a_key():\n    return {}['x']\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL + f"data: {{kind: class_path, class_path: {class_path}}}\n")
    return cfg.load(path)


def test_a_class_path_that_cannot_load_is_a_config_error(tmp_path):
    with pytest.raises(cfg.ConfigError, match=r"c.yaml: 'data.class_path': cannot load 'data.py:nothing'"):
        run_module.build(_dataset_config(tmp_path, "data.py:nothing"))
    with pytest.raises(cfg.ConfigError, match=r"'data.class_path': cannot load 'no_such_package.Data'"):
        run_module.build(_dataset_config(tmp_path, "no_such_package.Data"))


@pytest.mark.parametrize("function,error", [("needs_a_missing_library", ImportError), ("loses_a_key", KeyError)])
def test_what_a_dataset_itself_raises_is_not_taken_for_a_config_error(tmp_path, function, error):
    with pytest.raises(error) as caught:
        run_module.build(_dataset_config(tmp_path, f"data.py:{function}"))
    assert not isinstance(caught.value, cfg.ConfigError)


def test_the_config_reference_page_is_in_sync_with_the_declarations():
    page = ROOT / "docs" / "config.md"
    assert page.read_text() == cfg.reference() + "\n", "regenerate it: python -m trainkit.cli.config > docs/config.md"
    for section in _sections().values():
        for f in dataclasses.fields(section):
            assert f.name in page.read_text()


def test_data_task_reaches_the_file_loader(tmp_path):
    import numpy as np

    np.savez(tmp_path / "d.npz", x=np.zeros((6, 2), np.float32), y=np.array([0, 1, 2, 0, 1, 2], np.float32))
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL.replace("in_features: 1", "in_features: 2") + "data: {kind: npz, path: d.npz}\n")
    targets = run_module.build(cfg.load(path, ["data.task=classification"])).dataset.tensors[1]
    assert str(targets.dtype).endswith("int64") and tuple(targets.shape) == (6,)
    targets = run_module.build(cfg.load(path, ["data.task=regression"])).dataset.tensors[1]
    assert str(targets.dtype).endswith("float32")
    with pytest.raises(cfg.ConfigError, match="'data.task' must be one of classification, regression"):
        cfg.load(path, ["data.task=ranking"])
