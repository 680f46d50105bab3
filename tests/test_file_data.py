"""Data from files and NumPy as a Keras user brings it: integer labels stay int64, a CSV label column trains
cross_entropy, float64 arrays take the model's dtype, and fit takes validation_data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trainkit
from trainkit import nn
from trainkit.data import load_csv, load_npz
from trainkit.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]

CLASSIFIER = """
name: blobs
model:
  class_path: trainkit.nn.Linear
  init_args: {{in_features: 2, out_features: 3}}
data:
{data}
optimizer: {{name: SGD, lr: 0.5}}
loss: cross_entropy
metrics: [accuracy]
trainer: {{epochs: 5, batch_size: 16, verbose: false}}
"""


def blobs(n=60):
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = np.stack([np.cos(2.1 * y), np.sin(2.1 * y)], 1) * 3 + rng.normal(scale=0.3, size=(n, 2))
    return x, y


def train(tmp_path, data: str) -> subprocess.CompletedProcess:
    config = tmp_path / "blobs.yaml"
    config.write_text(CLASSIFIER.format(data=data))
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "train", str(config), "--set", "output_dir=runs"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


def test_npz_integer_labels_train_cross_entropy(tmp_path):
    x, y = blobs()
    np.savez(tmp_path / "blobs.npz", x=x, y=y)
    ds = load_npz(tmp_path / "blobs.npz")
    assert ds.tensors[0].dtype == trainkit.float32 and ds.tensors[1].dtype == trainkit.int64
    done = train(tmp_path, "  kind: npz\n  path: blobs.npz")
    assert done.returncode == 0, done.stderr
    assert "accuracy" in done.stdout


def test_a_csv_label_column_trains_cross_entropy(tmp_path):
    x, y = blobs()
    rows = "\n".join(f"{a},{b},{c}" for (a, b), c in zip(x, y))
    (tmp_path / "blobs.csv").write_text("a,b,label\n" + rows + "\n")
    done = train(tmp_path, "  kind: csv\n  path: blobs.csv\n  inputs: [a, b]\n  targets: label")
    assert done.returncode == 0, done.stderr
    labels = load_csv(tmp_path / "blobs.csv", ["a", "b"], "label", task="classification").tensors[1]
    assert labels.dtype == trainkit.int64 and labels.shape == (60,)
    as_values = load_csv(tmp_path / "blobs.csv", ["a", "b"], "label").tensors[1]
    assert as_values.dtype == trainkit.float32 and as_values.shape == (60, 1)


def test_file_loaders_take_dtypes_per_part_and_check_class_indices(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.zeros((4, 2), np.uint8), y=np.array([0.0, 1.0, 2.0, 1.0]))
    x, y = load_npz(tmp_path / "d.npz", dtype={"x": "float32"}, task="classification").tensors
    assert x.dtype == trainkit.float32 and y.dtype == trainkit.int64 and y.tolist() == [0, 1, 2, 1]
    assert load_npz(tmp_path / "d.npz", task="regression").tensors[1].dtype == trainkit.float32
    np.savez(tmp_path / "bad.npz", x=np.zeros((2, 2)), y=np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="0.5, not a whole number"):
        load_npz(tmp_path / "bad.npz", task="classification")
    with pytest.raises(ValueError, match="task must be one of classification, regression"):
        load_npz(tmp_path / "d.npz", task="sorting")


def make():
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
    return Trainer(model, loss="cross_entropy", metrics=["accuracy"], seed=0, verbose=False)


def test_float64_numpy_is_cast_to_the_model_dtype_in_fit_evaluate_and_predict():
    x, y = blobs()
    assert x.dtype == np.float64
    trainer = make()
    history = trainer.fit(x, y, epochs=2, batch_size=16)
    assert len(history.history["loss"]) == 2
    assert set(trainer.evaluate(x, y)) == {"loss", "accuracy"}
    out = trainer.predict(x)
    assert out.dtype == trainkit.float32 and tuple(out.shape) == (60, 3)
    assert make().fit(x.tolist(), y.tolist(), epochs=1).history["loss"]  # lists too


def test_validation_data_is_keras_name_for_val_data():
    x, y = blobs()
    keras = make().fit(x[:48], y[:48], validation_data=(x[48:], y[48:]), epochs=2, batch_size=16)
    ours = make().fit(x[:48], y[:48], val_data=(x[48:], y[48:]), epochs=2, batch_size=16)
    assert keras.history == ours.history and len(keras.history["val_loss"]) == 2
    with pytest.raises(ValueError, match="not both"):
        make().fit(x, y, val_data=(x, y), validation_data=(x, y))
