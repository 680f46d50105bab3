"""Run folders as Lightning keeps them: runs/NAME/version_N, a `latest` file naming the newest, nothing clobbered by a
rerun, no half folder from a run that fails before its first epoch, and a saved config.yaml that reruns
from anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"

FAIL = """
from trainkit.callbacks.base import Callback


class Fail(Callback):
    def on_train_batch_begin(self, batch, logs=None):
        raise RuntimeError("broken on purpose")
"""


def trainkit(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=300,
    )


def train(out: Path, *args, config=CONFIG, cwd=None) -> subprocess.CompletedProcess:
    return trainkit("train", config, "--set", f"output_dir={out}", "--set", "trainer.epochs=3", *args, cwd=cwd)


def test_each_run_gets_a_version_folder_and_latest_names_the_newest(tmp_path):
    assert train(tmp_path).returncode == 0
    second = train(tmp_path, "--set", "optimizer.lr=0.1")
    assert second.returncode == 0, second.stderr
    base = tmp_path / "regression"
    assert sorted(p.name for p in base.iterdir()) == ["latest", "version_0", "version_1"]
    assert (base / "latest").read_text().strip() == "version_1"
    assert f"run folder {base / 'version_1'}" in second.stdout
    assert yaml.safe_load((base / "version_0" / "config.yaml").read_text())["optimizer"]["lr"] == 0.2
    assert yaml.safe_load((base / "version_1" / "config.yaml").read_text())["optimizer"]["lr"] == 0.1


def test_a_failed_rerun_leaves_the_earlier_run_and_no_half_folder(tmp_path):
    assert train(tmp_path).returncode == 0
    base = tmp_path / "regression"
    before = {p: p.read_bytes() for p in (base / "version_0").rglob("*") if p.is_file()}
    (tmp_path / "fail.py").write_text(FAIL)
    failed = train(tmp_path, "--set", f"callbacks=[{{class_path: {tmp_path / 'fail.py'}:Fail}}]")
    assert failed.returncode == 1 and "broken on purpose" in failed.stderr
    assert sorted(p.name for p in base.iterdir()) == ["latest", "version_0"]
    assert (base / "latest").read_text().strip() == "version_0"
    assert {p: p.read_bytes() for p in (base / "version_0").rglob("*") if p.is_file()} == before


def test_a_first_run_that_fails_before_its_first_epoch_leaves_nothing(tmp_path):
    (tmp_path / "fail.py").write_text(FAIL)
    failed = train(tmp_path / "runs", "--set", f"callbacks=[{{class_path: {tmp_path / 'fail.py'}:Fail}}]")
    assert failed.returncode == 1
    assert not (tmp_path / "runs" / "regression").exists()


def test_resume_takes_the_name_folder_a_version_folder_or_a_checkpoint(tmp_path):
    assert train(tmp_path).returncode == 0
    assert train(tmp_path).returncode == 0
    base = tmp_path / "regression"
    by_name = train(tmp_path, "--set", "trainer.epochs=4", "--resume", base)  # the latest: version_1
    assert by_name.returncode == 0, by_name.stderr
    assert f"run folder {base / 'version_1'}" in by_name.stdout and "done: 4 epochs" in by_name.stdout
    by_version = train(tmp_path, "--set", "trainer.epochs=5", "--resume", base / "version_0")
    assert by_version.returncode == 0 and f"run folder {base / 'version_0'}" in by_version.stdout
    by_file = train(tmp_path, "--set", "trainer.epochs=6", "--resume", base / "version_0" / "checkpoints" / "last.npz")
    assert by_file.returncode == 0 and "done: 6 epochs" in by_file.stdout
    assert sorted(p.name for p in base.iterdir()) == ["latest", "version_0", "version_1"]
    assert yaml.safe_load((base / "version_0" / "config.yaml").read_text())["trainer"]["epochs"] == 6
    assert len((base / "version_0" / "metrics.csv").read_text().splitlines()) == 1 + 6
    missing = train(tmp_path, "--resume", tmp_path / "nothing")
    assert missing.returncode == 2 and "no such run folder" in missing.stderr


def test_the_saved_config_reruns_from_another_folder(tmp_path):
    assert train(tmp_path / "runs").returncode == 0
    saved = tmp_path / "runs" / "regression" / "version_0" / "config.yaml"
    config = yaml.safe_load(saved.read_text())
    model_file = config["model"]["class_path"].partition(":")[0]
    assert Path(model_file).is_absolute() and Path(model_file).is_file()
    assert Path(config["output_dir"]).is_absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rerun = trainkit("train", saved, cwd=elsewhere)
    assert rerun.returncode == 0, rerun.stderr
    assert (tmp_path / "runs" / "regression" / "version_1" / "checkpoints" / "last.npz").is_file()
    assert not any(elsewhere.iterdir())


def test_saved_paths_of_data_files_and_callbacks_are_absolute(tmp_path):
    import numpy as np

    folder = tmp_path / "project"
    folder.mkdir()
    np.savez(folder / "d.npz", x=np.linspace(-1, 1, 20).reshape(-1, 1), y=np.linspace(0, 1, 20).reshape(-1, 1))
    (folder / "quiet.py").write_text(
        "from trainkit.callbacks.base import Callback\n\n\nclass Quiet(Callback):\n    pass\n"
    )
    text = CONFIG.read_text().replace("../examples", str(ROOT / "examples"))
    text = text.replace(
        "  kind: regression_curve\n  n: 100\n  noise: 0.05\n  seed: 0\n", "  kind: npz\n  path: d.npz\n"
    )
    text += "  - class_path: quiet.py:Quiet\n"
    (folder / "c.yaml").write_text(text)
    done = trainkit("train", folder / "c.yaml", "--set", "output_dir=runs", "--set", "trainer.epochs=2", cwd=folder)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load((folder / "runs" / "regression" / "version_0" / "config.yaml").read_text())
    assert config["data"]["path"] == str(folder / "d.npz")
    assert config["callbacks"][-1]["class_path"] == f"{folder / 'quiet.py'}:Quiet"
    assert config["output_dir"] == "runs"  # a rerun writes under the folder it is run from
