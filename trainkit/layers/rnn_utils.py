"""Packed sequences and padding helpers for recurrent layers (torch.nn.utils.rnn)."""

__all__: list[str] = []
