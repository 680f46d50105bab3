"""What the training display draws: an epoch's logs as fields, durations, the live bar line that a terminal
redraws in place (fitted to its width), and the epoch's summary wrapped over as many lines as it needs.

The functions are pure (text in, text out) so that the layout can be checked without a terminal; ``LiveBar``
is the one piece that writes, to a terminal stream.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Sequence
from typing import TextIO

from .base import Logs, plain

# Redraws closer together than this add nothing a reader can see and cost time on fast epochs.
REDRAW_INTERVAL_S = 0.05
BAR_WIDTH = 20
MIN_BAR_WIDTH = 8
INDENT = "    "


def log_fields(logs: Logs | None) -> list[str]:
    """The scalar logs as ``'key: value'`` fields, without per-parameter keys such as 'grad_norm/...'.

    >>> log_fields({"loss": 0.123456, "grad_norm/w": 1.0, "step": 10, "lr": 0.01})
    ['loss: 0.1235', 'step: 10', 'lr: 0.01']
    """
    fields = []
    for key, value in (logs or {}).items():
        value = plain(value)
        if "/" in key or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        fields.append(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return fields


def format_logs(logs: Logs | None) -> str:
    """``'loss: 0.1234 - val_loss: 0.2345'``: the fields of ``log_fields`` on one line.

    >>> format_logs({"loss": 0.5, "val_loss": 0.625})
    'loss: 0.5 - val_loss: 0.625'
    """
    return " - ".join(log_fields(logs))


def format_duration(seconds: float) -> str:
    """A duration as a person reads it: tenths of a second below 10 s, then seconds, minutes, hours.

    >>> [format_duration(s) for s in (0.04, 7.25, 42, 185, 7500)]
    ['0.0s', '7.2s', '42s', '3m05s', '2h05m']
    """
    if not math.isfinite(seconds):
        return "?"
    if seconds < 10:
        return f"{seconds:.1f}s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_step_time(seconds: float) -> str:
    """Time per training step as Keras writes it: ``'1s/step'``, ``'12ms/step'``, ``'350us/step'``.

    >>> [format_step_time(s) for s in (2.0, 0.0123, 0.00035)]
    ['2s/step', '12ms/step', '350us/step']
    """
    if seconds >= 1:
        return f"{seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/step"
    return f"{seconds * 1e6:.0f}us/step"


def bar_chars(stream: TextIO) -> tuple[str, str]:
    """The characters of a bar's done and remaining parts: box-drawing lines where the stream's encoding has
    them, ``=`` and ``-`` otherwise (a Latin-1 console, say).

    >>> import io
    >>> bar_chars(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    ('=', '-')
    """
    try:
        "━─".encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return "=", "-"
    return "━", "─"


def count_text(current: int, total: int | None) -> str:
    """``' 3/10'``: the batches done, right-aligned to the total's width; ``'3/?'`` when the total is unknown.

    >>> count_text(3, 10), count_text(7, None)
    (' 3/10', '7/?')
    """
    if total is None:
        return f"{current}/?"
    return f"{current:>{len(str(total))}}/{total}"


def draw_bar(current: int, total: int, width: int, chars: tuple[str, str] = ("━", "─")) -> str:
    """A bar ``width`` characters long, filled in proportion to ``current / total``.

    >>> draw_bar(5, 10, 10, ("#", "-"))
    '#####-----'
    """
    done = min(width, int(width * current / total)) if total else width
    return chars[0] * done + chars[1] * (width - done)


def bar_line(
    current: int,
    total: int | None,
    info: str,
    fields: Sequence[str],
    width: int,
    chars: tuple[str, str] = ("━", "─"),
) -> str:
    """The live line of an epoch, ``' 3/10 ━━━━━━────────── ETA 1.2s - loss: 0.1234'``, never wider than
    ``width``: the count and ``info`` always show, the bar shrinks (down to a few characters, then goes), and
    the ``fields`` that do not fit are left out (the epoch's summary shows them all).

    >>> bar_line(3, 10, "ETA 1.2s", ["loss: 0.1234"], 60, ("#", "-"))
    ' 3/10 ######-------------- ETA 1.2s - loss: 0.1234'
    >>> bar_line(3, 10, "ETA 1.2s", ["loss: 0.1234"], 30, ("#", "-"))
    ' 3/10 ####----------- ETA 1.2s'
    """
    head = count_text(current, total)
    core = f" {info}" if info else ""
    room = width - len(head) - len(core)
    bar_room = room - 1  # the space between the count and the bar
    if total is None or bar_room < MIN_BAR_WIDTH:
        bar_room = 0
    tail = ""
    for field in fields:
        if len(tail) + len(f" - {field}") > room - min(bar_room, MIN_BAR_WIDTH) - (1 if bar_room else 0):
            break
        tail += f" - {field}"
    if bar_room:
        bar_width = min(BAR_WIDTH, room - 1 - len(tail))
        line = f"{head} {draw_bar(current, total or 0, bar_width, chars)}{core}{tail}"
    else:
        line = f"{head}{core}{tail}"
    return line[:width]


def wrap_fields(fields: Sequence[str], width: int, indent: str = INDENT) -> list[str]:
    """``fields`` joined by ``' - '`` into lines of at most ``width`` characters, each field whole: a field
    that does not fit starts the next line (after ``indent``); one longer than a line stands alone on its own.

    >>> wrap_fields(["10/10 ====", "loss: 0.1", "val_loss: 0.2", "lr: 0.01"], 30)
    ['10/10 ==== - loss: 0.1', '    val_loss: 0.2 - lr: 0.01']
    """
    lines: list[str] = []
    line = ""
    for field in fields:
        if not line:
            line = (indent if lines else "") + field
        elif len(line) + 3 + len(field) <= width:
            line += f" - {field}"
        else:
            lines.append(line)
            line = indent + field
    if line:
        lines.append(line)
    return lines


def terminal_width(stream: TextIO, default: int = 80) -> int:
    """The width in columns of the terminal ``stream`` writes to (read again on each call: a window may be
    resized during training); ``COLUMNS`` or ``default`` when the stream has no terminal behind it."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size((default, 24)).columns


class LiveBar:
    """One line on a terminal, redrawn in place with a carriage return (at most every ``REDRAW_INTERVAL_S``),
    fitted to the terminal's width so that it never wraps; ``finish`` replaces it by lines that may wrap.

    ``total`` is the number of steps (None when unknown) and ``desc`` the epoch's title; ``n`` counts the steps.

    >>> import io
    >>> out = io.StringIO()
    >>> bar = LiveBar(out, total=4, desc="Epoch 1/1", width=50)
    >>> bar.chars = ("#", "-")
    >>> bar.draw(4, "ETA 0.1s", ["loss: 0.5"], force=True)
    >>> bar.finish("0.2s 50ms/step", ["loss: 0.25", "val_loss: 0.5", "lr: 0.1"])
    >>> for line in out.getvalue().split("\\r")[-1].splitlines():  # the last redraw: the summary, wrapped
    ...     print(line.rstrip())
    4/4 #################### 0.2s 50ms/step
        loss: 0.25 - val_loss: 0.5 - lr: 0.1
    """

    def __init__(self, stream: TextIO, total: int | None, desc: str, width: int | None = None) -> None:
        self.stream = stream
        self.total = total
        self.desc = desc
        self.n = 0
        self.width = width
        self.chars = bar_chars(stream)
        self.shown = ""  # what the line holds now
        self.last_draw = -math.inf
        self.closed = False

    def columns(self) -> int:
        return self.width if self.width is not None else terminal_width(self.stream)

    def _put(self, line: str) -> None:
        pad = " " * max(0, len(self.shown) - len(line))  # blank what a longer line left behind
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()
        self.shown = line

    def due(self, force: bool = False) -> bool:
        """Whether a ``draw`` now would redraw the line (open, and not drawn moments ago, unless ``force``)."""
        return not self.closed and (force or time.perf_counter() - self.last_draw >= REDRAW_INTERVAL_S)

    def draw(self, n: int, info: str, fields: Sequence[str], force: bool = False) -> None:
        """Show ``n`` steps done with ``info`` and as many ``fields`` as fit; skipped when the last redraw was
        moments ago, unless ``force``."""
        self.n = n
        if not self.due(force):
            return
        self.last_draw = time.perf_counter()
        # one column short of the width: a line that fills it leaves some terminals wrapping at the next '\r'
        self._put(bar_line(n, self.total, info, fields, max(1, self.columns() - 1), self.chars))

    def finish(self, info: str, fields: Sequence[str]) -> None:
        """Replace the line by the count, the bar and ``info``, then every one of ``fields``, wrapped to the
        terminal's width rather than cut; and close the bar."""
        if self.closed:
            return
        width = max(1, self.columns() - 1)
        lines = wrap_fields([bar_line(self.n, self.total, info, (), width, self.chars), *fields], width)
        self._put(lines[0] if lines else "")
        rest = "".join(f"\n{line}" for line in lines[1:])
        self.stream.write(f"{rest}\n")
        self.stream.flush()
        self.closed = True

    def write(self, text: str, file: TextIO | None = None) -> None:
        """Print ``text`` above the bar (the bar is drawn again under it), as ``tqdm.write`` does."""
        shown = self.shown
        if not self.closed and shown:
            self._put("")
            self.stream.write("\r")
        print(text, file=file if file is not None else self.stream, flush=True)
        if not self.closed and shown:
            self.shown = ""
            self._put(shown)

    def close(self) -> None:
        """End the line where it stands (a run stopped mid-epoch keeps its last state on screen)."""
        if not self.closed:
            if self.shown:
                self.stream.write("\n")
                self.stream.flush()
            self.closed = True
