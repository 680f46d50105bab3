"""The command's help as a user reads it: every subcommand explains its arguments, shows examples, and train and
check list the names a config can use (from the registries)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainkit.registry import CALLBACKS, DATA_KINDS, LOSSES, OPTIMIZERS, SCHEDULERS


def help_of(*args) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "trainkit", *args, "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_top_level_help_names_the_commands_and_the_exit_codes():
    text = help_of()
    for word in ("train", "evaluate", "check", "graph", "bench", "exit codes", "COMMAND --help"):
        assert word in text


@pytest.mark.parametrize("command", ["train", "evaluate", "check", "graph"])
def test_each_command_explains_config_and_shows_examples(command):
    text = help_of(command)
    assert "the run's YAML config" in text
    assert f"examples:\n  trainkit {command} configs/" in text
    assert "--set KEY.PATH=VALUE" in text


@pytest.mark.parametrize("command", ["train", "check"])
def test_train_and_check_list_every_registered_name(command):
    text = help_of(command)
    for registry in (OPTIMIZERS, SCHEDULERS, LOSSES, CALLBACKS, DATA_KINDS):
        for name in registry:
            assert name in text
    assert "docs/config.md" in text
