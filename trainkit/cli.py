"""The ``trainkit`` command line."""

from __future__ import annotations

import argparse
import sys

from trainkit import __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``trainkit`` command.

    >>> main(["--version"])  # doctest: +SKIP
    trainkit 0.1.0
    """
    parser = argparse.ArgumentParser(prog="trainkit", description="Train models described by a YAML config.")
    parser.add_argument("--version", action="version", version=f"trainkit {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
