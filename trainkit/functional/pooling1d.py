"""1-d pooling over (N, C, L): max, average and adaptive."""

__all__: list[str] = []
