"""Fused recurrent ops: one op per layer and direction over the whole sequence."""

__all__: list[str] = []
