"""Transformer encoder and decoder layers and stacks (nn.Transformer*)."""

__all__: list[str] = []
