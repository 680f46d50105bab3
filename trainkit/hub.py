"""``trainkit.hub`` (``torch.hub``): refused, since trainkit fetches no code or weights from the network.

``load``, ``list``, ``help`` and ``load_state_dict_from_url`` raise ``RuntimeError`` naming what was asked and the
way that works: download the weights yourself and load them with ``trainkit.load`` (PyTorch's ``.pt`` files read
without running pickle code; see docs/ecosystem.md).

>>> import trainkit
>>> trainkit.hub.load("pytorch/vision", "resnet18")
Traceback (most recent call last):
trainkit.hub.HubError: torch.hub.load('pytorch/vision', 'resnet18'): trainkit does not download ...
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["HubError", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

NO_NETWORK = (
    "{call}: trainkit does not download models or code from the network; fetch the weights file yourself and load "
    "it with trainkit.load(path) (PyTorch's .pt files are read without running their code), see docs/ecosystem.md"
)
HUB_DIR = [os.path.join(os.path.expanduser("~"), ".cache", "torch", "hub")]


class HubError(RuntimeError):
    """What every network call of ``trainkit.hub`` raises.

    >>> issubclass(HubError, RuntimeError)
    True
    """


def refuse(name: str, *args: Any) -> HubError:
    """The error for ``torch.hub.<name>(*args)``.

    >>> str(refuse("list", "a/b")).startswith("torch.hub.list('a/b')")
    True
    """
    shown = ", ".join(repr(a) for a in args)
    return HubError(NO_NETWORK.format(call=f"torch.hub.{name}({shown})"))


def load(repo_or_dir: str, model: str, *args: Any, **kwargs: Any):
    """Refuses (no network).

    >>> load("a/b", "m")
    Traceback (most recent call last):
    trainkit.hub.HubError: torch.hub.load('a/b', 'm'): ...
    """
    raise refuse("load", repo_or_dir, model)


def list(github: str, *args: Any, **kwargs: Any):  # noqa: A001  (PyTorch's name)
    """Refuses (no network).

    >>> list("a/b")
    Traceback (most recent call last):
    trainkit.hub.HubError: torch.hub.list('a/b'): ...
    """
    raise refuse("list", github)


def help(github: str, model: str, *args: Any, **kwargs: Any):  # noqa: A001  (PyTorch's name)
    """Refuses (no network).

    >>> help("a/b", "m")
    Traceback (most recent call last):
    trainkit.hub.HubError: torch.hub.help('a/b', 'm'): ...
    """
    raise refuse("help", github, model)


def load_state_dict_from_url(url: str, *args: Any, **kwargs: Any):
    """Refuses (no network): download ``url`` yourself and call ``trainkit.load`` on the file.

    >>> load_state_dict_from_url("https://example.com/w.pth")
    Traceback (most recent call last):
    trainkit.hub.HubError: torch.hub.load_state_dict_from_url('https://example.com/w.pth'): ...
    """
    raise refuse("load_state_dict_from_url", url)


def get_dir() -> str:
    """The folder PyTorch's hub would cache into (``set_dir`` changes it); trainkit writes nothing there.

    >>> get_dir().endswith("hub")
    True
    """
    return HUB_DIR[0]


def set_dir(d: str) -> None:
    """Records the folder ``get_dir`` returns.

    >>> set_dir(get_dir())
    """
    HUB_DIR[0] = os.fspath(d)
