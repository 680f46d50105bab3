"""``History`` as Keras has it: ``.history`` (key -> one value per epoch), ``.epoch`` (the epochs' numbers, from 0)
and ``.params`` (``epochs``, ``steps``, ``verbose``), from a callback given to ``fit`` and from what ``fit`` returns."""

from __future__ import annotations

import json

import trainkit
from trainkit import nn
from trainkit.callbacks import History
from trainkit.trainer import Trainer


def make_trainer(callbacks=(), **kwargs) -> Trainer:
    trainkit.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
    return Trainer(model, loss="mse", callbacks=list(callbacks), seed=0, verbose=False, **kwargs)


def curve(n: int = 40):
    x = trainkit.linspace(-1, 1, n).unsqueeze(1)
    return x, x * x


def test_a_history_given_to_fit_has_epoch_and_params():
    history = History()
    trainer = make_trainer([history])
    x, y = curve()
    trainer.fit(x, y, epochs=3, batch_size=10, validation_split=0.25)  # 30 training samples: 3 batches
    assert history.epoch == [0, 1, 2]
    assert history.params == {"epochs": 3, "steps": 3, "steps_per_epoch": 3, "verbose": False}
    assert sorted(history.history) == ["epoch", "loss", "lr", "val_loss"]
    assert all(len(values) == 3 for values in history.history.values())
    assert history.history["loss"] == trainer.history["loss"]


def test_params_take_verbose_as_fit_was_given_it():
    history = History()
    trainer = make_trainer([history])
    trainer.fit(*curve(), epochs=2, batch_size=40, verbose=0)
    assert (history.params["verbose"], history.params["steps"], history.params["epochs"]) == (0, 1, 2)


def test_what_fit_returns_numbers_its_epochs():
    trainer = make_trainer()
    result = trainer.fit(*curve(), epochs=4, batch_size=10)
    assert result.epoch == [0, 1, 2, 3]
    assert len(result.history["loss"]) == 4 and "epoch" not in result.history  # Keras' shape: metrics only


def test_what_fit_returns_has_params():
    trainer = make_trainer()
    result = trainer.fit(*curve(), epochs=2, batch_size=10)
    assert result.params == {"epochs": 2, "steps": 4, "steps_per_epoch": 4, "verbose": False}


def test_a_resumed_run_numbers_every_epoch_from_the_first(tmp_path):
    first = make_trainer(run_dir=tmp_path)
    first.fit(*curve(), epochs=2, batch_size=10)
    history = History()
    resumed = make_trainer([history], run_dir=tmp_path)
    result = resumed.fit(*curve(), epochs=5, batch_size=10, resume_from=tmp_path / "checkpoints" / "last.npz")
    assert history.epoch == [2, 3, 4]  # the callback saw this fit's epochs
    assert result.epoch == [0, 1, 2, 3, 4] and len(result.history["loss"]) == 5  # the run's, as history.jsonl
    rows = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [0, 1, 2, 3, 4]


def test_epoch_and_params_without_a_trainer():
    history = History()
    assert history.epoch == [] and dict(history.params) == {}
    history.set_params({"epochs": 3, "steps": 7, "verbose": 1})  # Keras' key for the batches an epoch
    assert history.params["steps_per_epoch"] == 7
    history.on_epoch_end(0, {"loss": 1.0})
    history.on_epoch_end(1, {"loss": 0.5})
    assert history.epoch == [0, 1]
    plain = History()
    plain.history = {"loss": [1.0, 0.5, 0.25]}
    assert plain.epoch == [0, 1, 2]
    plain.epoch = [3, 4, 5]
    assert plain.epoch == [3, 4, 5]


def test_state_round_trip_keeps_the_epochs():
    history = History()
    for epoch in range(3):
        history.on_epoch_end(epoch, {"loss": 1.0 / (epoch + 1)})
    again = History()
    again.load_state_dict(json.loads(json.dumps(history.state_dict())))
    assert again.epoch == [0, 1, 2] and again.history == history.history
