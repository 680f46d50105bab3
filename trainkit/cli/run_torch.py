"""``trainkit run-torch SCRIPT [ARGS...]``: runs a PyTorch program unmodified, on trainkit.

The script runs as ``python SCRIPT ARGS...`` would run it: ``sys.argv`` is ``[SCRIPT, *ARGS]``, ``__name__`` is
``"__main__"``, ``__file__`` is its absolute path, its folder comes first on ``sys.path``, an uncaught exception
prints Python's traceback (the script's frames only) and exits 1, ``sys.exit(n)`` exits ``n``, Ctrl-C prints the
traceback and exits 130. Before it starts, ``trainkit.torch_alias.install()`` makes ``import torch`` and every
``torch.X.Y`` the trainkit module of the same path.

``--nproc N`` (torchrun's ``--nproc_per_node``) starts N ranks through ``mpiexec``, as ``torchrun
--nproc_per_node=N`` does: each rank finds torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ...), which it sets itself from the MPI launcher's own, so
``mpiexec -n N trainkit run-torch SCRIPT`` is the same. A rank that fails ends the whole job.

>>> run(["train.py", "--epochs", "2"])  # doctest: +SKIP
>>> run(["train.py"], nproc=2)  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import types
import uuid
import warnings
from pathlib import Path

from .. import torch_alias
from ..distributed import follow_torch_rules, launched_size, world

# Python's own warning format: the command sets its own for configs, a script's warnings name its lines
PYTHON_FORMATWARNING = warnings.formatwarning
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
OWN_FILES = {os.path.realpath(__file__), os.path.realpath(torch_alias.__file__)}

# the variables MPI launchers set: a rank's number, its number on its machine, and how many share the machine
# (MPICH's hydra, Open MPI, PMIx, Slurm)
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
LOCAL_RANK_VARIABLES = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")
NPROC_OPTIONS = ("--nproc", "--nproc_per_node", "--nproc-per-node")

__all__ = ["launch", "main", "run", "split_nproc", "torchrun_environment"]


def run(argv: list[str], nproc: int | None = None) -> int:
    """Runs ``argv[0]`` as the ``__main__`` program with ``argv`` as its ``sys.argv``; the exit status. With
    ``nproc``, starts that many ranks of it through ``mpiexec`` instead (``launch``).

    An unreadable script is Python's own message and status 2 (``can't open file ...``).

    >>> run(["no/such/script.py"])  # doctest: +SKIP
    2
    """
    if nproc is not None:
        return launch(nproc, argv)
    script = argv[0]
    try:
        source = Path(script).read_bytes()
    except OSError as err:
        path = os.path.join(os.getcwd(), script)
        print(f"{sys.executable}: can't open file {path!r}: [Errno {err.errno}] {err.strerror}", file=sys.stderr)
        return 2
    filename = script if os.path.isabs(script) else os.path.join(os.getcwd(), script)
    prepare(argv, filename)
    main_module = types.ModuleType("__main__")
    loader = importlib.machinery.SourceFileLoader("__main__", filename)
    main_module.__dict__.update(
        {"__file__": filename, "__builtins__": builtins, "__cached__": None, "__loader__": loader}
    )
    sys.modules["__main__"] = main_module
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
        exec(code, main_module.__dict__)
    except SystemExit as err:
        status = err.code if isinstance(err.code, int) or err.code is None else 1
        if status and launched_size() > 1:  # a failing rank takes the job with it, as torchrun ends the others
            if not isinstance(err.code, int):
                print(err.code, file=sys.stderr)  # what python prints for sys.exit("message")
            end_job(f"exit status {status}", status)
        raise  # the interpreter exits with its code, as it does for python SCRIPT
    except KeyboardInterrupt as err:
        report(err)
        end_job("interrupted", 130)
        return 130
    except BaseException as err:  # noqa: BLE001  (the script's failure, reported as python reports it)
        report(err)
        end_job(f"uncaught {type(err).__name__}: {err}", 1)
        return 1
    return 0


def end_job(message: str, code: int) -> None:
    """In a job of several ranks, end them all: the others may wait for this one in a collective forever."""
    if launched_size() > 1 and not world().aborting:
        world().abort(message, code)


def launch(nproc: int, argv: list[str]) -> int:
    """Start ``nproc`` ranks of ``trainkit run-torch ARGV`` through ``mpiexec``, with torchrun's shared
    variables set (each rank adds its own ``RANK`` and ``LOCAL_RANK``); the job's exit status.

    >>> launch(2, ["train.py"])  # doctest: +SKIP
    0
    """
    if not isinstance(nproc, int) or nproc < 1:
        print(f"trainkit run-torch: --nproc must be a positive number of processes, got {nproc}", file=sys.stderr)
        return 2
    beside = Path(sys.executable).parent / "mpiexec"  # the one installed with mpi4py's MPICH, else the PATH's
    mpiexec = str(beside) if beside.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        print(
            "trainkit run-torch: --nproc starts the ranks with mpiexec, which is not installed: "
            "pip install 'trainkit[distributed]'",
            file=sys.stderr,
        )
        return 2
    env = dict(os.environ)
    env.update(
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        MASTER_ADDR=env.get("MASTER_ADDR", "localhost"),
        MASTER_PORT=env.get("MASTER_PORT", str(free_port())),
        TORCHELASTIC_RUN_ID=env.get("TORCHELASTIC_RUN_ID", uuid.uuid4().hex),
        GROUP_RANK="0",
        ROLE_NAME="default",
        ROLE_WORLD_SIZE=str(nproc),
    )
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun: N processes on one machine, one thread each
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(PACKAGE_ROOT)]))
    command = [mpiexec, "-n", str(nproc), sys.executable, "-m", "trainkit.torch_run", *argv]
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130


def free_port() -> int:
    """A TCP port nothing listens on now, for ``MASTER_PORT`` (which programs may read; MPI does not use it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun_environment() -> None:
    """Under an MPI launcher, set torchrun's per-rank variables from the launcher's own: ``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``ROLE_RANK``, and ``MASTER_ADDR``/``MASTER_PORT`` when
    unset (programs read them; MPI needs neither). Nothing changes without a launcher.

    >>> torchrun_environment()  # doctest: +SKIP
    """
    size = launched_size()
    if size == 1 and not any(os.environ.get(name) for name in RANK_VARIABLES):
        return
    rank = first_of(RANK_VARIABLES)
    local_rank = first_of(LOCAL_RANK_VARIABLES)
    if rank is None or local_rank is None:  # a launcher that says neither: ask MPI
        rank, local_rank = str(world().rank), str(world().local_rank)
    local_size = first_of(LOCAL_SIZE_VARIABLES) or str(size)
    os.environ.update(
        RANK=rank,
        LOCAL_RANK=local_rank,
        WORLD_SIZE=str(size),
        LOCAL_WORLD_SIZE=local_size,
        GROUP_RANK=os.environ.get("GROUP_RANK", "0"),
        ROLE_RANK=rank,
        MASTER_ADDR=os.environ.get("MASTER_ADDR", "localhost"),
        MASTER_PORT=os.environ.get("MASTER_PORT", "29500"),
    )


def first_of(names: tuple[str, ...]) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value and value.isdigit():
            return value
    return None


def prepare(argv: list[str], filename: str) -> None:
    """The interpreter's state as ``python SCRIPT`` leaves it: argv, the script's folder first on the path,
    Python's warning format and signals, and ``torch`` imported as trainkit."""
    sys.argv[:] = list(argv)
    folder = os.path.dirname(os.path.realpath(filename))
    replaced = sys.path[0] if sys.path else None
    sys.path[:1] = [folder]
    if replaced is not None and os.path.realpath(replaced or ".") == str(PACKAGE_ROOT):
        sys.path.append(replaced)  # the checkout trainkit runs from stays importable, after everything else
    warnings.formatwarning = PYTHON_FORMATWARNING
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torchrun_environment()
    follow_torch_rules()  # a PyTorch program: its process group is the one init_process_group makes
    torch_alias.install()


def report(err: BaseException) -> None:
    """Prints ``err`` through ``sys.excepthook`` as python SCRIPT would: the script's frames (and the modules it
    called) only."""
    sys.excepthook(type(err), err, err.with_traceback(own_frames_removed(err.__traceback__)).__traceback__)


def own_frames_removed(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without the launcher's and the import hook's frames (python SCRIPT shows neither)."""
    frames = []
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename) not in OWN_FILES:
            frames.append(tb)
        tb = tb.tb_next
    kept = None
    for frame in reversed(frames):
        kept = types.TracebackType(kept, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return kept


def main(argv: list[str] | None = None) -> int:
    """``python -m trainkit.torch_run SCRIPT [ARGS...]``: the same as ``trainkit run-torch``.

    >>> main([])  # doctest: +SKIP
    2
    """
    argv = sys.argv[1:] if argv is None else argv
    try:
        nproc, argv = split_nproc(argv)
    except ValueError as err:
        print(f"trainkit run-torch: {err}", file=sys.stderr)
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: trainkit run-torch [--nproc N] SCRIPT [ARGS...]\n\n"
            "run a PyTorch program unmodified on trainkit: import torch gives trainkit\n\n"
            "  --nproc N, --nproc_per_node N  start N ranks through mpiexec, each with torchrun's variables",
            file=sys.stderr if not argv else sys.stdout,
        )
        return 0 if argv else 2
    return run(argv, nproc)


def split_nproc(argv: list[str]) -> tuple[int | None, list[str]]:
    """The ``--nproc N`` (``--nproc_per_node N``, ``--nproc_per_node=N``) before the script, and the rest.

    >>> split_nproc(["--nproc_per_node=2", "train.py", "--nproc", "9"])
    (2, ['train.py', '--nproc', '9'])
    """
    nproc = None
    while argv and argv[0].split("=", 1)[0] in NPROC_OPTIONS:
        option, _, value = argv[0].partition("=")
        if not value:
            if len(argv) < 2:
                raise ValueError(f"{option} needs a number of processes")
            value, argv = argv[1], argv[2:]
        else:
            argv = argv[1:]
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{option} must be a positive number of processes, got {value!r}")
        nproc = int(value)
    return nproc, list(argv)
