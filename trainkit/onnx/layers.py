"""Converters of whole layers (one row per layer class)."""

from __future__ import annotations

__all__ = ["LAYER_CONVERTERS"]

LAYER_CONVERTERS: dict = {}
