"""trainkit.layers (also ``trainkit.nn``): Module, Parameter, layers and losses."""

from .container import ModuleDict, ModuleList, Sequential
from .module import Module
from .parameter import Buffer, Parameter
from .summary import summary

__all__ = ["Buffer", "Module", "ModuleDict", "ModuleList", "Parameter", "Sequential", "summary"]
