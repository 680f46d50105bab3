"""The run folder's lock under contention: processes started together on one folder, over a lock file a killed run
left behind, get it exactly one at a time; the kernel lets go of a lock whatever ends its process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from trainkit.cli.run_lock import RunFolderBusy, RunLock

CONTENDER = """
import sys, time
from trainkit.cli.run_lock import RunFolderBusy, RunLock
folder, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    pass
try:
    lock = RunLock(folder).acquire()
except RunFolderBusy:
    print("busy")
else:
    got = time.time()
    time.sleep(0.5)
    print("got", got, time.time(), flush=True)
    lock.release()
"""


@pytest.mark.parametrize("trial", range(3))
def test_processes_taking_over_a_stale_lock_together_get_it_once(tmp_path, trial):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / ".lock").write_text(json.dumps({"host": os.uname().nodename, "pid": int(gone.stdout)}))
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, str(tmp_path), str(start)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(12)
    ]
    outcomes = [p.communicate(timeout=60)[0].split() for p in procs]
    held = sorted((float(o[1]), float(o[2])) for o in outcomes if o[0] == "got")
    assert held and len(held) + sum(o == ["busy"] for o in outcomes) == len(procs), outcomes
    # one holder at a time: a contender that started late may take the lock after its holder let go, never before
    assert all(later[0] >= earlier[1] for earlier, later in zip(held, held[1:])), held
    assert not (tmp_path / ".lock").exists()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_holder_leaves_a_lock_the_next_run_takes(tmp_path, how):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from trainkit.cli.run_lock import RunLock; RunLock({str(tmp_path)!r}).acquire(); "
            "print('held', flush=True); import time; time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunFolderBusy, match=f"in use by process {holder.pid}"):
        RunLock(tmp_path).acquire()
    holder.send_signal(how)
    holder.wait(timeout=30)
    lock = RunLock(tmp_path).acquire()  # the file is still there; the kernel's lock is not
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / ".lock").exists()


def test_release_then_acquire_in_one_process(tmp_path):
    for _ in range(3):
        lock = RunLock(tmp_path).acquire()
        with pytest.raises(RunFolderBusy):
            RunLock(tmp_path).acquire()
        lock.release()
