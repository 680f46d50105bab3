"""1-d convolution and pooling layers over (N, C, L)."""

__all__: list[str] = []
