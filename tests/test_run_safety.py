"""Run folders a careless or hostile config cannot misuse: a run name is one folder name, one writer per run
folder (a second one fails at once naming the first), stale locks and temporary files from killed runs are cleaned
up, and two runs started together take different version folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "regression.yaml"


def command(*args, cwd) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "trainkit", *map(str, args)],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def train(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainkit", "train", *map(str, args)],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize("name", ["../../escaped", ".", "..", "a/b", "/tmp/abs"])
def test_a_run_name_is_one_folder_name(tmp_path, name):
    work = tmp_path / "work"
    work.mkdir()
    done = train(CONFIG, "--set", f"name={name}", "--set", "trainer.epochs=1", cwd=work)
    assert done.returncode == 2 and "'name' must be one folder name" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and not any(work.iterdir())


def test_a_second_writer_of_a_run_folder_fails_at_once_naming_the_first(tmp_path):
    first = train(CONFIG, "--set", "trainer.epochs=2", "--set", "callbacks=[]", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / "regression" / "version_0"
    long = command(
        "train", CONFIG, "--resume", folder, "--set", "trainer.epochs=3000", "--set", "callbacks=[]", cwd=tmp_path
    )
    try:
        lock = folder / ".lock"
        deadline = time.monotonic() + 120
        while not lock.exists() and time.monotonic() < deadline and long.poll() is None:
            time.sleep(0.05)
        assert lock.exists(), long.stderr.read() if long.poll() is not None else "no lock"
        second = train(CONFIG, "--resume", folder, "--set", "trainer.epochs=3000", cwd=tmp_path)
        assert second.returncode == 1
        assert f"is in use by process {long.pid}" in second.stderr and str(lock) in second.stderr
    finally:
        long.kill()
        long.wait()


def test_a_stale_lock_and_stale_temporaries_are_cleaned_up(tmp_path):
    first = train(CONFIG, "--set", "trainer.epochs=2", "--set", "callbacks=[]", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "runs" / "regression" / "version_0"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (folder / ".lock").write_text(json.dumps({"host": os.uname().nodename, "pid": int(gone.stdout)}))
    leftover = folder / "checkpoints" / "last.npz.a1b2c3.tmp"
    leftover.write_bytes(b"half a checkpoint")
    resumed = train(CONFIG, "--resume", folder, "--set", "trainer.epochs=3", "--set", "callbacks=[]", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert not leftover.exists() and not (folder / ".lock").exists()


def test_runs_started_together_take_their_own_versions(tmp_path):
    runs = [
        command("train", CONFIG, "--set", "trainer.epochs=20", "--set", "callbacks=[]", cwd=tmp_path) for _ in range(2)
    ]
    for run in runs:
        run.wait(timeout=300)
        assert run.returncode == 0, run.stderr.read()
    base = tmp_path / "runs" / "regression"
    assert sorted(p.name for p in base.iterdir() if p.is_dir()) == ["version_0", "version_1"]
    for version in ("version_0", "version_1"):
        rows = (base / version / "metrics.csv").read_text().splitlines()
        assert len(rows) == 21  # a header and one row per epoch, nothing interleaved
    assert (base / "latest").read_text() == "version_1\n"
    assert not list(base.glob("*.tmp"))


def test_latest_never_goes_back_to_an_older_version(tmp_path, monkeypatch):
    """A run that listed the versions before another run made a newer one looks again after writing ``latest``."""
    from trainkit.cli import run as run_module

    base = tmp_path / "runs"
    (base / "version_0").mkdir(parents=True)
    listed = run_module.versions

    def slow_listing(where):
        found = listed(where)
        (base / "version_1").mkdir(exist_ok=True)  # another run starts meanwhile
        return found

    monkeypatch.setattr(run_module, "versions", slow_listing)
    run_module._mark_latest(base)
    assert (base / "latest").read_text() == "version_1\n"


def test_threads_of_one_process_mark_latest_together(tmp_path):
    """Each thread writes ``latest`` through a temporary file of its own: none takes another's away."""
    import threading

    from trainkit.cli import run as run_module

    base = tmp_path / "runs"
    for n in range(3):
        (base / f"version_{n}").mkdir(parents=True)
    errors = []

    def mark():
        for _ in range(100):
            try:
                run_module._mark_latest(base)
            except OSError as err:
                errors.append(err)

    threads = [threading.Thread(target=mark) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (base / "latest").read_text() == "version_2\n"
    assert not list(base.glob("*.tmp"))
