"""Recurrent layers (RNN, LSTM, GRU) and their cells, as torch.nn has them."""

__all__: list[str] = []
