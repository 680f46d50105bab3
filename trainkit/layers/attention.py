"""Multi-head attention (nn.MultiheadAttention)."""

__all__: list[str] = []
