"""1-d convolution and transposed convolution over (N, C, L)."""

__all__: list[str] = []
