"""The keyword arguments a class takes, as a config gives them: read off its signature, each with the first sentence
its docstring says about it; a config's ``callbacks`` entries checked against them, and their reference.

The signature is the truth (names, defaults, which are required); a docstring adds a line of meaning where it has
an arguments section, in any of the usual layouts (Google ``Args:``, NumPy ``Parameters`` with a dashed rule,
Sphinx ``:param name:``). A docstring without one, or one that names an argument the signature lacks, changes
nothing but the meaning column: the reference stays correct while the prose is being written.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from ..registry import CALLBACKS, Registry
from .settings import SettingError, check_choice

__all__ = ["Argument", "argument_table", "arguments", "callback_reference", "callback_spec", "docstring_arguments"]


@dataclass(frozen=True)
class Argument:
    """One keyword argument: its name, its annotation as written (or ''), its default (``required`` when it has
    none) and the first sentence its docstring says about it (or '').

    >>> Argument("patience", "int", 0, False, "epochs to wait.").default
    0
    """

    name: str
    annotation: str
    default: Any
    required: bool
    help: str


# An arguments section's heading, in Google style ("Args:") or NumPy style ("Parameters" over a dashed rule).
_HEADING = re.compile(r"^(args|arguments|parameters|params|keyword args|keyword arguments|other parameters):?$", re.I)
_RULE = re.compile(r"^-{3,}$")
# "name: text", "name (type): text", "name : type" (NumPy: the text is on the lines below), "*args: text"
_ENTRY = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:(?P<rest>.*)$")
_SENTENCE_END = re.compile(r"(?<=[^.]\.)\s+(?=[A-Z`(])")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(?P<name>[A-Za-z_]\w*)\s*:(?P<rest>.*)$")


def _first_sentence(lines: list[str]) -> str:
    """The first sentence of an entry's text, its lines joined (markup kept: ``code`` reads as code in Markdown
    too); a sentence ends at a full stop before a capital letter, so ``e.g. x`` stays whole."""
    text = " ".join(line.strip() for line in lines if line.strip())
    return _SENTENCE_END.split(text, maxsplit=1)[0]


def docstring_arguments(doc: str | None) -> dict[str, str]:
    """Argument name -> the first line of its description, from a docstring's arguments section(s).

    >>> docstring_arguments('''Stops early.
    ...
    ... Args:
    ...     patience: epochs without improvement before stopping.
    ...         More on a second line.
    ...     mode (str): ``'min'`` or ``'max'``.
    ...     size (tuple (int, int), default (1, 2)): the size.
    ... ''')
    {'patience': 'epochs without improvement before stopping.', 'mode': "``'min'`` or ``'max'``.", 'size': 'the size.'}
    >>> docstring_arguments("Parameters\\n----------\\nlog_dir : str\\n    where the event files go\\n")
    {'log_dir': 'where the event files go'}
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    found: dict[str, str] = {}
    for line in lines:  # Sphinx fields may sit anywhere
        match = _SPHINX.match(line.strip())
        if match and match["rest"].strip():
            found.setdefault(match["name"], match["rest"].strip())
    i = 0
    while i < len(lines):
        heading = lines[i].strip()
        if not _HEADING.match(heading):
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        numpy = i + 1 < len(lines) and bool(_RULE.match(lines[i + 1].strip()))
        i += 2 if numpy else 1
        entry_indent = None
        name, text = None, []
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            depth = len(line) - len(line.lstrip())
            if stripped and (depth < indent or (depth == indent and not numpy) or _HEADING.match(stripped)):
                break  # the section ended: text back at the heading's level, or the next heading
            if numpy and stripped and depth == indent and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
                break  # the next NumPy section
            if stripped and (entry_indent is None or depth <= entry_indent) and _ENTRY.match(stripped):
                if name is not None:
                    found.setdefault(name, _first_sentence(text))
                entry_indent = depth
                match = _ENTRY.match(stripped)
                name = match["name"]
                rest = match["rest"].strip()
                text = [] if numpy else [rest]  # NumPy's "name : type" holds the type, the text follows
            elif name is not None:
                text.append(line)
            i += 1
        if name is not None:
            found.setdefault(name, _first_sentence(text))
    return {k: v for k, v in found.items() if v}


def arguments(cls: Any) -> list[Argument]:
    """The keyword arguments of ``cls`` (a class: its ``__init__``'s, without ``self``; ``*args``/``**kwargs``
    left out), each with the first line its class or ``__init__`` docstring gives it.

    >>> class Stop:
    ...     '''Stops early.
    ...
    ...     Args:
    ...         patience: epochs to wait.
    ...     '''
    ...     def __init__(self, monitor: str, patience: int = 0): ...
    >>> [(a.name, a.required, a.default, a.help) for a in arguments(Stop)]
    [('monitor', True, None, ''), ('patience', False, 0, 'epochs to wait.')]
    """
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: nothing can be said
        return []
    init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
    helps = {**docstring_arguments(getattr(init, "__doc__", None)), **docstring_arguments(cls.__doc__)}
    found = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.kind is p.POSITIONAL_ONLY:
            continue
        required = p.default is p.empty
        annotation = "" if p.annotation is p.empty else p.annotation
        if not isinstance(annotation, str):
            annotation = inspect.formatannotation(annotation)
        found.append(Argument(p.name, annotation, None if required else p.default, required, helps.get(p.name, "")))
    return found


def _value_text(value: Any) -> str:
    """A default as YAML would write it (``null``, ``true``, ``1.0e-07``, ``"\\n"``), or its repr when YAML cannot."""
    if isinstance(value, str) and not value.isprintable():  # a newline would break the table's line
        return json.dumps(value)
    try:
        text = yaml.safe_dump([value], default_flow_style=True, width=sys.maxsize).strip()[1:-1]
    except yaml.representer.RepresenterError:
        return repr(value)
    return text


def argument_table(cls: Any) -> list[str]:
    """The Markdown table of ``cls``'s keyword arguments: name, type, default, meaning.

    >>> class Stop:
    ...     def __init__(self, patience: int = 0): ...
    >>> argument_table(Stop)[2]
    '| `patience` | int | `0` |  |'
    """
    lines = ["| argument | type | default | meaning |", "| --- | --- | --- | --- |"]
    for a in arguments(cls):
        default = "required" if a.required else f"`{_value_text(a.default)}`"
        kind = a.annotation.replace("|", "or")  # a "|" would end the table's cell
        meaning = a.help.replace("|", "\\|")
        lines.append(f"| `{a.name}` | {kind} | {default} | {meaning} |")
    return lines


def callback_spec(spec: Any, i: int) -> str | dict:
    """Entry ``i`` of ``callbacks`` checked, in the form the run takes: a name, or a mapping of ``name`` (a
    registered callback) or ``class_path`` (your own) with the keyword arguments beside it. The arguments may also
    sit under ``init_args``, as for ``model`` and ``data``; they are moved inline, and one given both ways is
    refused. A registered callback's arguments are checked against its signature (names, required ones).

    >>> callback_spec({"name": "EarlyStopping", "init_args": {"patience": 3}}, 0)
    {'name': 'EarlyStopping', 'patience': 3}
    >>> callback_spec({"name": "EarlyStopping", "patiense": 3}, 0)
    Traceback (most recent call last):
    ...
    trainkit.cli.settings.SettingError: 'callbacks[0].patiense' is not an argument of EarlyStopping; did you mean \
'patience'? (it takes monitor, min_delta, patience, mode, restore_best_weights)
    """
    where = f"callbacks[{i}]"
    if isinstance(spec, str):
        check_choice(spec, CALLBACKS, where)
        return spec
    if not isinstance(spec, dict) or not {"name", "class_path"} & set(spec):
        raise SettingError(where, "must be a name or a mapping with 'name' or 'class_path'")
    if "name" in spec and "class_path" in spec:
        raise SettingError(f"{where}.class_path", "and name are both given: name a callback or give a class_path")
    head = "name" if "name" in spec else "class_path"
    if not isinstance(spec[head], str):
        raise SettingError(f"{where}.{head}", f"must be a string, got {spec[head]!r}")
    args = {k: v for k, v in spec.items() if k not in ("name", "class_path", "init_args")}
    nested = spec.get("init_args")
    if nested is not None and not isinstance(nested, dict):
        raise SettingError(f"{where}.init_args", f"must be a mapping of keyword arguments, got {nested!r}")
    for key, value in (nested or {}).items():
        if key in args:
            raise SettingError(f"{where}.init_args.{key}", f"is given twice, as {where}.{key} too: keep one of the two")
        args[key] = value
    for key in args:
        if not isinstance(key, str) or not key.isidentifier():
            raise SettingError(f"{where}.{key}", "is not a keyword argument's name")
    if head == "name":
        check_choice(spec["name"], CALLBACKS, f"{where}.name")
        _check_callback_args(CALLBACKS.get(spec["name"]), spec["name"], args, where)
    return {head: spec[head], **args}


def _check_callback_args(cls: type, name: str, args: dict, where: str) -> None:
    """Refuse arguments ``cls`` does not take (unless it takes ``**kwargs``) and required ones left out."""
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    takes = arguments(cls)
    names = [a.name for a in takes]
    for key in args:
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            listed = f" (it takes {', '.join(names)})" if names else " (it takes none)"
            raise SettingError(f"{where}.{key}", f"is not an argument of {name}{hint}{listed}")
    for a in takes:
        if a.required and a.name not in args:
            raise SettingError(f"{where}.{a.name}", f"is required by {name}" + (f": {a.help}" if a.help else ""))


def callback_reference(registry: Registry, notes: dict[str, str] | None = None) -> list[str]:
    """The Markdown section on ``callbacks``: how an entry is written, then each registered callback with the first
    paragraph of its docstring and the table of its arguments (``argument_table``), and ``notes[name]`` when given.

    >>> from trainkit.registry import CALLBACKS
    >>> lines = callback_reference(CALLBACKS)
    >>> lines[0], "### `EarlyStopping`" in lines
    ('## `callbacks`: callbacks and their arguments', True)
    """
    lines = [
        "## `callbacks`: callbacks and their arguments",
        "",
        "Each entry is a callback's name, or a mapping of `name` (one of those below) or `class_path` (your own "
        "`Callback` subclass) with the callback's keyword arguments, written beside it or under `init_args` "
        "as for `model` and `data` (an argument given both ways is a config error naming it):",
        "",
        "    callbacks:",
        "      - ProgressBar",
        "      - name: EarlyStopping",
        "        patience: 3",
        "      - class_path: my_callbacks.py:Notify",
        "        init_args: {every: 5}",
        "",
        "The arguments of a named callback are checked when the config loads (a misspelt one suggests the "
        "nearest). The tables below are read off each class's signature and its docstring; an argument "
        "whose type is no YAML value (a file object, a scheduler) is for Python use.",
        "",
    ]
    for name in registry:
        cls = registry.get(name)
        summary = inspect.cleandoc(cls.__doc__ or "").split("\n\n", 1)[0].replace("\n", " ")
        lines.extend([f"### `{name}`", "", summary, ""])
        lines.extend([*argument_table(cls), ""] if arguments(cls) else ["It takes no arguments.", ""])
        if notes and name in notes:
            lines.extend([notes[name], ""])
    return lines
