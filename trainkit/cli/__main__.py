"""``python -m trainkit.cli``: the ``trainkit`` command, for when the script is not on the PATH."""

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
