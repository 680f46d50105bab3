"""``trainkit run-torch SCRIPT [ARGS...]``: runs a PyTorch program unmodified, on trainkit.

The script runs as ``python SCRIPT ARGS...`` would run it: ``sys.argv`` is ``[SCRIPT, *ARGS]``, ``__name__`` is
``"__main__"``, ``__file__`` is its absolute path, its folder comes first on ``sys.path``, an uncaught exception
prints Python's traceback (the script's frames only) and exits 1, ``sys.exit(n)`` exits ``n``, Ctrl-C prints the
traceback and exits 130. Before it starts, ``trainkit.torch_alias.install()`` makes ``import torch`` and every
``torch.X.Y`` the trainkit module of the same path.

>>> run(["train.py", "--epochs", "2"])  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import signal
import sys
import threading
import types
import warnings
from pathlib import Path

from .. import torch_alias

# Python's own warning format: the command sets its own for configs, a script's warnings name its lines
PYTHON_FORMATWARNING = warnings.formatwarning
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
OWN_FILES = {os.path.realpath(__file__), os.path.realpath(torch_alias.__file__)}

__all__ = ["main", "run"]


def run(argv: list[str]) -> int:
    """Runs ``argv[0]`` as the ``__main__`` program with ``argv`` as its ``sys.argv``; the exit status.

    An unreadable script is Python's own message and status 2 (``can't open file ...``).

    >>> run(["no/such/script.py"])  # doctest: +SKIP
    2
    """
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
    except SystemExit:
        raise  # the interpreter exits with its code, as it does for python SCRIPT
    except KeyboardInterrupt as err:
        report(err)
        return 130
    except BaseException as err:  # noqa: BLE001  (the script's failure, reported as python reports it)
        report(err)
        return 1
    return 0


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
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: trainkit run-torch SCRIPT [ARGS...]\n\n"
            "run a PyTorch program unmodified on trainkit: import torch gives trainkit",
            file=sys.stderr if not argv else sys.stdout,
        )
        return 0 if argv else 2
    return run(argv)
