"""Recurrent cells (RNNCell, LSTMCell, GRUCell): one time step, composed of differentiable ops."""

__all__: list[str] = []
