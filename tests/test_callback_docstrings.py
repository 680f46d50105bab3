"""Every built-in callback's docstring states each constructor argument, in the one format the config reference is
generated from:

    Args:
        name (type, default VALUE): meaning, continued on lines
            indented four more.
        name (type, required): meaning.

``type`` is the annotation as the signature writes it, ``VALUE`` a Python literal equal to the default; the entries
follow the signature's order. A callback whose constructor takes no argument has no ``Args`` section.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import trainkit.callbacks as callbacks
from trainkit.callbacks.base import Callback, CallbackList
from trainkit.callbacks.monitor import MonitorCallback
from trainkit.callbacks.resume_point import ResumePoint

ENTRY = re.compile(r"^    (?P<name>\w+) \((?P<type>.+?), (?:default (?P<default>.+?)|required)\): (?P<meaning>\S.*)$")
BUILT_IN = sorted(
    {
        cls
        for cls in (getattr(callbacks, name) for name in callbacks.__all__)
        if isinstance(cls, type) and issubclass(cls, Callback) and cls not in (Callback, CallbackList)
    }
    | {ResumePoint, MonitorCallback},
    key=lambda cls: cls.__name__,
)


def args_section(doc: str) -> list[str] | None:
    """The lines of the ``Args:`` section (indented as in the cleaned docstring), or None without one."""
    lines = inspect.cleandoc(doc).splitlines()
    if "Args:" not in lines:
        return None
    section = []
    for line in lines[lines.index("Args:") + 1 :]:
        if not line.strip():
            break
        assert line.startswith("    "), f"the Args section ends without a blank line before {line!r}"
        section.append(line)
    return section


def parse(section: list[str]) -> list[dict]:
    entries = []
    for line in section:
        if line.startswith("        "):  # the meaning continued
            assert entries, f"a continuation line before any entry: {line!r}"
            entries[-1]["meaning"] += " " + line.strip()
            continue
        found = ENTRY.match(line)
        assert found, f"not an entry of the form 'name (type, default VALUE): meaning': {line!r}"
        entries.append(found.groupdict())
    return entries


PENDING: set[str] = set()  # callbacks whose docstring has no Args section yet


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(cls, marks=pytest.mark.xfail(reason="no Args section yet")) if cls.__name__ in PENDING else cls
        for cls in BUILT_IN
    ],
    ids=lambda cls: cls.__name__,
)
def test_the_docstring_states_every_constructor_argument(cls):
    parameters = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    section = args_section(cls.__doc__ or "")
    if not parameters:
        assert section is None, f"{cls.__name__} takes no argument, yet its docstring has an Args section"
        return
    assert section is not None, f"{cls.__name__}'s docstring has no Args section"
    entries = parse(section)
    assert [e["name"] for e in entries] == [p.name for p in parameters]
    for entry, parameter in zip(entries, parameters):
        where = f"{cls.__name__}({parameter.name})"
        assert entry["type"] == parameter.annotation, where
        if parameter.default is inspect.Parameter.empty:
            assert entry["default"] is None, f"{where} is required, the docstring gives a default"
        else:
            assert entry["default"] is not None, f"{where} has a default, the docstring says required"
            assert ast.literal_eval(entry["default"]) == parameter.default, where
        assert len(entry["meaning"]) > 10, where


def test_the_list_covers_the_callbacks_a_config_can_name():
    names = {cls.__name__ for cls in BUILT_IN}
    assert {"EarlyStopping", "ModelCheckpoint", "CSVLogger", "TensorBoard", "TextSample", "ProgressBar"} <= names
