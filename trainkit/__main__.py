"""``python -m trainkit``: the ``trainkit`` command (``trainkit.cli``), for when the script is not on the PATH."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
