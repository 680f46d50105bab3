"""Recurrent cells (RNNCell, LSTMCell, GRUCell): one time step, composed of differentiable ops.

Each cell is a few ordinary ops (two linear maps, chunk, sigmoid/tanh, products and sums), so a loop over time
written by the user records the per-step graph it reads as, and double backward works through it. The stacked
weights hold the gates in PyTorch's order: LSTM (i, f, g, o), GRU (r, z, n).
"""

from __future__ import annotations

import math

from .. import functional as F
from ..autograd.creation import empty, zeros
from ..autograd.ops.activation import relu, sigmoid, tanh
from ..autograd.tensor import Tensor
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _check_input(input: Tensor, input_size: int) -> None:
    if input.size(1) != input_size:
        raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {input_size}")


def _check_hidden(input: Tensor, hx: Tensor, hidden_size: int, label: int) -> None:
    if input.size(0) != hx.size(0):
        raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{label} batch size {hx.size(0)}")
    if hx.size(1) != hidden_size:
        raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {hx.size(1)}, expected {hidden_size}")


class RNNCellBase(Module):
    """What the three cells share: ``weight_ih`` (chunks * H, input_size), ``weight_hh`` (chunks * H, H) and, with
    ``bias``, ``bias_ih`` and ``bias_hh`` (chunks * H,), all drawn from U(-1/sqrt(H), 1/sqrt(H)) in that order,
    as ``torch.nn.RNNCellBase``.

    >>> cell = RNNCellBase(3, 4, bias=True, num_chunks=2)
    >>> cell.weight_ih.shape, cell.bias_hh.shape
    (trainkit.Size([8, 3]), trainkit.Size([8]))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.__dict__.get("bias", True) is not True:
            s += f", bias={self.bias}"
        nonlinearity = self.__dict__.get("nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        """Draw every weight and bias anew from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _batched(self, input: Tensor, hx: Tensor | None) -> tuple[Tensor, Tensor, bool]:
        """input and hx as (N, *) batches (zeros for a missing hx), and whether input came batched."""
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
        elif not is_batched:
            hx = hx.unsqueeze(0)
        return input, hx, is_batched


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu), as ``torch.nn.RNNCell``.

    Input (N, input_size) or (input_size,), hx of the matching (N, hidden_size) or (hidden_size,), zeros when
    left out.

    >>> import trainkit
    >>> cell = RNNCell(3, 4)
    >>> cell
    RNNCell(3, 4)
    >>> h = cell(trainkit.ones(2, 3))
    >>> cell(trainkit.ones(2, 3), h).shape
    trainkit.Size([2, 4])
    """

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if input.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        input, hx, is_batched = self._batched(input, hx)
        if self.nonlinearity == "tanh":
            activation = tanh
        elif self.nonlinearity == "relu":
            activation = relu
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        _check_input(input, self.input_size)
        _check_hidden(input, hx, self.hidden_size, 0)
        h = activation(F.linear(input, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh))
        return h if is_batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of an LSTM, as ``torch.nn.LSTMCell``. With gates = x W_ih^T + b_ih + h W_hh^T + b_hh split into
    (i, f, g, o): c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c').

    Input (N, input_size) or (input_size,); hx the pair (h, c) of (N, hidden_size) or (hidden_size,), zeros when
    left out. Returns (h', c').

    >>> import trainkit
    >>> cell = LSTMCell(3, 4, bias=False)
    >>> cell
    LSTMCell(3, 4, bias=False)
    >>> h, c = cell(trainkit.ones(3))
    >>> h.shape, c.shape
    (trainkit.Size([4]), trainkit.Size([4]))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            h = c = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
        elif is_batched:
            if not isinstance(hx, (tuple, list)):
                raise TypeError(
                    f"lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, not {type(hx).__name__}"
                )
            if len(hx) != 2:
                raise RuntimeError("lstm_cell expects two hidden states")
            h, c = hx
        else:
            h, c = hx[0].unsqueeze(0), hx[1].unsqueeze(0)
        _check_input(input, self.input_size)
        _check_hidden(input, h, self.hidden_size, 0)
        _check_hidden(input, c, self.hidden_size, 1)
        gates = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        i, f, g, o = gates.chunk(4, 1)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g)
        h = sigmoid(o) * tanh(c)
        if not is_batched:
            return h.squeeze(0), c.squeeze(0)
        return h, c


class GRUCell(RNNCellBase):
    """One step of a GRU, as ``torch.nn.GRUCell``. With (r, z, n) the thirds of the stacked weights:
    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.

    Input (N, input_size) or (input_size,), hx of the matching (N, hidden_size) or (hidden_size,), zeros when
    left out.

    >>> import trainkit
    >>> cell = GRUCell(3, 4)
    >>> cell
    GRUCell(3, 4)
    >>> cell(trainkit.ones(5, 3)).shape
    trainkit.Size([5, 4])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if input.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        input, hx, is_batched = self._batched(input, hx)
        _check_input(input, self.input_size)
        _check_hidden(input, hx, self.hidden_size, 0)
        i_r, i_z, i_n = F.linear(input, self.weight_ih, self.bias_ih).chunk(3, 1)
        h_r, h_z, h_n = F.linear(hx, self.weight_hh, self.bias_hh).chunk(3, 1)
        r = sigmoid(i_r + h_r)
        z = sigmoid(i_z + h_z)
        n = tanh(i_n + r * h_n)
        h = n + z * (hx - n)  # = (1 - z) * n + z * h, one op fewer
        return h if is_batched else h.squeeze(0)
