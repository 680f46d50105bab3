"""Warnings that point at the user's line: the first frame outside the trainkit package.

A fixed ``stacklevel`` is right for one call path only: a callback's warning comes through ``Trainer.fit``, the
strategy and ``CallbackList``, a layer's through ``Module.__call__``. ``warn_user`` walks out of trainkit instead,
so ``python -W error`` and the printed file and line name the code the user wrote.
"""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../trainkit/


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside trainkit.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_user("careful")
    >>> caught[0].filename.startswith(_PACKAGE), str(caught[0].message)
    (False, 'careful')
    """
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
