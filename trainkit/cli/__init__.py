"""The ``trainkit`` command and what it stands on: ``command`` (the command line), ``config`` (the YAML schema, one
dataclass field per key), ``settings`` (the machinery that reads, checks and writes such declarations), ``run``
(building a run from a config in its own run folder), ``run_lock`` (one writer per run folder), ``dry_run``
(``trainkit check``: one batch through the model) and ``process`` (settings that belong to the whole process, such
as the allocator's).

>>> from trainkit.cli import main
>>> main(["--version"])  # doctest: +SKIP
trainkit 0.1.0
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``trainkit`` command with ``argv`` (``sys.argv[1:]`` when None) and return its exit code."""
    # Imported when called, so that ``python -m trainkit.cli.config`` does not load its own module twice.
    from .command import main as run_command

    return run_command(argv)
