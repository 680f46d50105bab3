"""The error ``fullgraph=True`` raises when a region cannot be compiled whole."""

from __future__ import annotations


class CompileError(RuntimeError):
    """A compiled region had to run eagerly; the message says why (raised with ``fullgraph=True`` only).

    >>> str(CompileError("tensor.item() reads a value inside the region"))
    'tensor.item() reads a value inside the region'
    """
