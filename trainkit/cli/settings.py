"""Declared settings: a section of a config is a dataclass whose fields are its keys, declared with ``setting``.

This module is the machinery behind ``trainkit.cli.config``'s declarations: reading YAML safely (``read_yaml``),
checking a mapping of keys against a section's fields (type, choices, bounds, unknown keys with the nearest one
suggested) into an instance (``resolve_section``), applying ``--set key.path=value`` to the raw mapping
(``apply_override``), and writing a section's values or its reference table with each key's help
(``yaml_lines``, ``reference_table``). Plain dataclasses rather than pydantic or jsonargparse: those would add a
dependency and start-up time to every run of the command, and need wrapping to name the file and suggest the nearest
key, while the lines here give exactly those messages and a contributor needs only the standard library to add a key.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, field
from pathlib import Path
from typing import Any

import yaml

from ..registry import Registry, UnknownNameError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "ConfigError",
    "SettingError",
    "apply_override",
    "default_of",
    "is_section",
    "read_yaml",
    "read_yaml_file",
    "reference_table",
    "resolve_section",
    "section",
    "setting",
    "yaml_lines",
]


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (no Python tags) that reads numbers as a person writes them: YAML 1.1 wants a dot in a
    float, so ``1e-3`` and ``1e6`` would stay strings; here they are floats, as in YAML 1.2 and Python."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


# A config holds tens of values; these bounds leave room for any real one and refuse what only an attack needs:
# anchors whose aliases multiply into millions of values (each is copied into the config's dataclasses), and nesting
# deeper than the parser's recursion allows.
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 100


def _check_unique_keys(loader: _Loader, node: yaml.MappingNode) -> None:
    """YAML forbids a repeated key in one mapping, and PyYAML would silently keep the last one: refuse it, naming
    both lines. Keys brought in by a merge (``<<: *base``) may be overridden, as YAML's merge allows."""
    seen: dict = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            first, again = seen[key].start_mark.line + 1, key_node.start_mark.line + 1
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} appears twice in one mapping (lines {first} and {again})", None
            )
        seen[key] = key_node


def _mapping(loader: _Loader, node: yaml.MappingNode):
    _check_unique_keys(loader, node)
    data: dict = {}
    yield data
    loader.flatten_mapping(node)
    data.update(yaml.SafeLoader.construct_mapping(loader, node))


_Loader.add_constructor("tag:yaml.org,2002:map", _mapping)


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(values, depth) of the document with every alias expanded, counted without expanding: a node reached through
    several aliases counts once per path, which is what copying the document costs."""
    sizes: dict[int, tuple[int, int]] = {}
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done and children:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        values = 1 + sum(sizes[id(c)][0] for c in children)
        depth = 1 + max((sizes[id(c)][1] for c in children), default=0)
        sizes[id(node)] = (min(values, MAX_YAML_VALUES + 1), depth)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def read_yaml(text: str) -> Any:
    """Parse YAML safely (``yaml.safe_load``'s rules, no Python tags), with ``1e-3`` and ``1e6`` read as floats.
    A repeated key, aliases that expand past ``MAX_YAML_VALUES`` values and nesting deeper than ``MAX_YAML_DEPTH``
    raise ``yaml.YAMLError`` instead of being read.

    >>> read_yaml("lr: 1e-3\\nsteps: 1e6\\nmomentum: .9\\nepochs: 10")
    {'lr': 0.001, 'steps': 1000000.0, 'momentum': 0.9, 'epochs': 10}
    >>> read_yaml("a: 1\\na: 2")
    Traceback (most recent call last):
    ...
    yaml.constructor.ConstructorError: the key 'a' appears twice in one mapping (lines 1 and 2)
    """
    loader = _Loader(text)  # a SafeLoader: no Python tags
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
        if node is None:
            return None
        values, depth = _expanded_size(node)
        if depth > MAX_YAML_DEPTH:
            raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH} levels")
        if values > MAX_YAML_VALUES:
            raise yaml.YAMLError(f"its anchors and aliases expand to more than {MAX_YAML_VALUES:,} values")
        return loader.construct_document(node)
    finally:
        loader.dispose()


class ConfigError(ValueError):
    """A problem in a run config: the message names the file and the key."""


class SettingError(ValueError):
    """Raised by a section's ``check`` for one of its keys; ``load`` adds the file and the section to the message.

    >>> str(SettingError("path", "is required for data.kind npz"))
    "'path' is required for data.kind npz"
    """

    def __init__(self, key: str, message: str):
        super().__init__(f"'{key}' {message}")
        self.key, self.message = key, message


# A config is a few kilobytes; a larger file is a mistake (a data file named as the config) or an attack, and
# reading it whole would cost its size many times over.
MAX_CONFIG_BYTES = 1 << 20


def read_yaml_file(file: Path) -> Any:
    """The YAML document in ``file``, or a ``ConfigError`` naming the file: missing, larger than
    ``MAX_CONFIG_BYTES``, not UTF-8 text, or not valid YAML (``read_yaml``'s refusals included).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    >>> _ = p.write_bytes("name: r".encode("utf-16"))
    >>> read_yaml_file(p)
    Traceback (most recent call last):
    ...
    trainkit.cli.settings.ConfigError: .../c.yaml: not UTF-8 text (byte 0xff at offset 0); save it as UTF-8
    """
    if not file.is_file():
        raise ConfigError(f"{file}: no such config file")
    size = file.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{file}: {size:,} bytes is too large for a config (at most {MAX_CONFIG_BYTES:,})")
    data = file.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{file}: not UTF-8 text (byte {data[err.start]:#04x} at offset {err.start}); save it as UTF-8"
        ) from None
    try:
        return read_yaml(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: not valid YAML: {err}") from None


def default_of(func: Callable, name: str) -> Any:
    """The default of parameter ``name`` in ``func``'s signature: a config default that means the same as the code's.

    >>> def fit(epochs: int = 1): ...
    >>> default_of(fit, "epochs")
    1
    """
    return inspect.signature(func).parameters[name].default


def setting(
    default: Any = MISSING,
    help: str = "",
    *,
    choices: Any = None,
    ge: float | None = None,  # noqa: A002
    gt: float | None = None,
    lt: float | None = None,
) -> Any:
    """One config key: a dataclass field with its default (none: required), help text and allowed values or bounds.

    ``choices`` is a tuple of values or a ``Registry``; a mutable default (``{}``, ``[]``) is copied for every config.

    >>> @dataclasses.dataclass(kw_only=True)
    ... class Example:
    ...     steps: int = setting(10, "how many steps", ge=1)
    >>> Example().steps, dataclasses.fields(Example)[0].metadata["help"]
    (10, 'how many steps')
    """
    metadata = {"help": help, "choices": choices, "ge": ge, "gt": gt, "lt": lt}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def section(help: str, absent: dict | None = None) -> Any:  # noqa: A002
    """A field holding a whole section (its type is the section's dataclass; its keys come from there).

    ``absent`` is what a config without the section (or with it null) means; by default, every key's default.

    >>> @dataclasses.dataclass(kw_only=True)
    ... class Whole:
    ...     part: dict = section("a part")
    >>> dataclasses.fields(Whole)[0].metadata["help"]
    'a part'
    """
    return field(default=None, metadata={"help": help, "absent": absent})


def is_section(hint: Any) -> bool:
    """Whether a field's type is a section (a dataclass) rather than a value.

    >>> is_section(int), is_section(SettingError)
    (False, False)
    """
    return dataclasses.is_dataclass(hint)


# ------------------------------------------------------------------------------------------------------ checking
_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true/false",
    list: "a list",
    dict: "a mapping",
    type(None): "null",
}


def _types(hint) -> tuple:
    """The runtime types a value of annotation ``hint`` may have (a YAML integer is a number too)."""
    args = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    found = tuple(typing.get_origin(a) or a for a in args)
    return found + ((int,) if float in found else ())


def check_choice(value: Any, choices: Any, key: str) -> None:
    """Raise ``SettingError`` unless ``value`` is one of ``choices`` (a tuple, or a ``Registry`` that knows it),
    suggesting the nearest.

    >>> check_choice("dpp", ("ddp", "auto"), "strategy")
    Traceback (most recent call last):
    ...
    trainkit.cli.settings.SettingError: 'strategy' must be one of ddp, auto, got 'dpp'; did you mean 'ddp'?
    """
    if isinstance(choices, Registry):
        try:
            choices.get(value)
        except UnknownNameError as err:
            raise SettingError(key, f"names an {err}") from None
    elif value not in choices:
        near = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        raise SettingError(
            key,
            f"must be one of {', '.join(map(str, choices))}, got {value!r}"
            + (f"; did you mean '{near[0]}'?" if near else ""),
        )


def _check_bounds(value, meta: dict, key: str) -> None:
    ge, gt, lt = meta.get("ge"), meta.get("gt"), meta.get("lt")
    if (ge is None or value >= ge) and (gt is None or value > gt) and (lt is None or value < lt):
        return
    if lt is not None:
        low = f"[{ge}" if ge is not None else f"({gt}" if gt is not None else "(-inf"
        raise SettingError(key, f"must be in {low}, {lt}), got {value}")
    if gt is not None:
        raise SettingError(key, f"must be {'positive' if gt == 0 else f'greater than {gt}'}, got {value}")
    raise SettingError(key, f"must be at least {ge}, got {value}")


def _check_value(value, hint, meta: dict, key: str) -> None:
    allowed = _types(hint)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        names = " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in allowed if t is not int or float not in allowed))
        raise SettingError(key, f"must be {names}, got {value!r}")
    if value is None or isinstance(value, (dict, list)):
        return
    choices = meta.get("choices")
    # a Registry holds names; a tuple may hold numbers too (trainer.verbose: 0, 1, 2 or auto)
    if choices is not None and (isinstance(value, str) or not isinstance(choices, Registry)):
        check_choice(value, choices, key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_bounds(value, meta, key)


def resolve_section(cls: type, raw: Any, where: str, file: Path) -> Any:
    """An instance of section ``cls`` from the mapping ``raw`` (its sections too): keys checked, defaults filled,
    each section's ``check`` run. ``where`` is the section's dotted key ('' at the top), ``file`` the config's.

    >>> @dataclasses.dataclass(kw_only=True)
    ... class Steps:
    ...     steps: int = setting(10, "how many steps", ge=1)
    >>> resolve_section(Steps, {}, "run", Path("c.yaml"))
    Steps(steps=10)
    >>> resolve_section(Steps, {"step": 3}, "run", Path("c.yaml"))
    Traceback (most recent call last):
    ...
    trainkit.cli.settings.ConfigError: c.yaml: unknown key 'run.step'; did you mean 'steps'?
    """
    if raw is None:  # an empty section in YAML
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: '{where}' must be a mapping of settings, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in raw:
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else f"; valid keys: {', '.join(fields)}"
            raise ConfigError(
                f"{file}: unknown key '{where}.{key}'{hint}" if where else f"{file}: unknown key '{key}'{hint}"
            )
    values = {}
    for name, f in fields.items():
        path = f"{where}.{name}" if where else name
        if is_section(hints[name]):
            given = raw.get(name)
            if given is None and f.metadata.get("absent") is not None:
                given = copy.deepcopy(f.metadata["absent"])
            values[name] = resolve_section(hints[name], given, path, file)
        elif name in raw:
            try:
                _check_value(raw[name], hints[name], f.metadata, name)
            except SettingError as err:
                raise ConfigError(f"{file}: '{path}' {err.message}") from None
            values[name] = raw[name]
        elif f.default is not MISSING:
            values[name] = copy.deepcopy(f.default)
        elif f.default_factory is not MISSING:
            values[name] = f.default_factory()
        else:
            raise ConfigError(f"{file}: '{path}' is required ({f.metadata.get('help', '')})")
    instance = cls(**values)
    if hasattr(instance, "check"):
        try:
            instance.check()
        except SettingError as err:
            raise ConfigError(f"{file}: '{where + '.' if where else ''}{err.key}' {err.message}") from None
    return instance


def apply_override(raw: dict, assignment: str, file: Path) -> None:
    """Apply one ``--set key.path=value`` to the raw mapping of a config (the value is read as YAML: numbers,
    booleans, lists work), before it is checked.

    >>> raw = {"trainer": {"epochs": 3}}
    >>> apply_override(raw, "trainer.seed=1e3", Path("c.yaml")); raw
    {'trainer': {'epochs': 3, 'seed': 1000.0}}
    """
    key, sep, text = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key.path=value, got {assignment!r}")
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        if node.get(part) is None:
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"{file}: --set {key}: '{part}' is not a section")
    try:
        node[parts[-1]] = read_yaml(text)
    except yaml.YAMLError as err:  # a Python tag is refused here too, as in a config file
        reason = " ".join(str(err).split())
        raise ConfigError(f"{file}: --set {key}: the value is not valid YAML: {reason}") from None


# ------------------------------------------------------------------------------------------------------ writing
class _OneLineDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that writes a string holding a newline or another control character double-quoted
    (``"ROMEO:\\n"``), where PyYAML's own choice would break the line and its key's comment."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None if value.isprintable() else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_OneLineDumper.add_representer(str, _represent_str)


def _flow(value) -> str:
    """``value`` as one line of YAML.

    >>> print(_flow({"prompt": "ROMEO:\\n", "top_k": 20}))
    {prompt: "ROMEO:\\n", top_k: 20}
    """
    text = yaml.dump([value], Dumper=_OneLineDumper, default_flow_style=True, sort_keys=False, width=sys.maxsize)
    return text.strip()[1:-1]


def _help(f: dataclasses.Field) -> str:
    text = f.metadata.get("help", "")
    choices = f.metadata.get("choices")
    if choices is not None:
        text += f" (one of {', '.join(map(str, choices))})"
    return f"  # {text}" if text else ""


def yaml_lines(cls: type, values: dict, indent: str = "") -> list[str]:
    """The lines of YAML for ``values`` (a mapping of section ``cls``'s keys, sections as mappings), each key with
    its help as a comment; keys ``cls`` does not declare are written without one.

    >>> @dataclasses.dataclass(kw_only=True)
    ... class Steps:
    ...     steps: int = setting(10, "how many steps", ge=1)
    >>> yaml_lines(Steps, {"steps": 3})
    ['steps: 3  # how many steps']
    """
    lines = []
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        f = fields.get(key)
        if f is not None and is_section(hints[key]) and isinstance(value, dict):
            lines.append(f"{indent}{key}:{_help(f)}")
            lines.extend(yaml_lines(hints[key], value, indent + "  "))
        else:
            lines.append(f"{indent}{key}: {_flow(value)}{_help(f) if f else ''}")
    return lines


def _type_text(hint) -> str:
    names = [_TYPE_NAMES[t].split(" ", 1)[-1] for t in _types(hint) if t is not int or float not in _types(hint)]
    return " or ".join(dict.fromkeys(names))


def _default_text(f: dataclasses.Field) -> str:
    if f.default_factory is not MISSING:
        return f"`{_flow(f.default_factory())}`"
    return "required" if f.default is MISSING else f"`{_flow(f.default)}`"


def _allowed_text(meta: dict) -> str:
    choices = meta.get("choices")
    if choices is not None:
        return ", ".join(f"`{c}`" for c in choices)
    bounds = [f"{op} {meta[key]}" for key, op in (("ge", ">="), ("gt", ">"), ("lt", "<")) if meta.get(key) is not None]
    return ", ".join(bounds)


def reference_table(cls: type, prefix: str) -> list[str]:
    """The Markdown table of section ``cls``'s keys (not its sections): key, type, default, allowed values, help.

    >>> @dataclasses.dataclass(kw_only=True)
    ... class Steps:
    ...     steps: int = setting(10, "how many steps", ge=1)
    >>> reference_table(Steps, "run.")[2]
    '| `run.steps` | integer | `10` | >= 1 | how many steps |'
    """
    hints = typing.get_type_hints(cls)
    lines = ["| key | type | default | allowed | meaning |", "| --- | --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if not is_section(hints[f.name]):
            lines.append(
                f"| `{prefix}{f.name}` | {_type_text(hints[f.name])} | {_default_text(f)} | "
                f"{_allowed_text(f.metadata)} | {f.metadata.get('help', '')} |"
            )
    lines.append("")
    return lines
