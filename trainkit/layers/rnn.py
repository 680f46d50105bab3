"""Recurrent layers RNN, LSTM and GRU, as ``torch.nn`` has them, on the fused ops of ``functional.rnn``.

Parameters per layer ``k`` and direction (``_reverse`` for the second): ``weight_ih_l{k}`` (G H, in),
``weight_hh_l{k}`` (G H, H or proj), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (G H,) and, for an LSTM with ``proj_size``,
``weight_hr_l{k}`` (proj, H); G = 1 (RNN), 3 (GRU, gates r, z, n) or 4 (LSTM, gates i, f, g, o). All start uniform
in [-1/sqrt(H), 1/sqrt(H)], drawn in registration order. Each layer and direction is one graph node.
"""

from __future__ import annotations

import math
import numbers
import warnings

from ..autograd.creation import empty, zeros
from ..autograd.tensor import Tensor
from ..functional.rnn import recurrent
from . import init
from .module import Module
from .parameter import Parameter
from .rnn_utils import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """The parameters, checks and stacking shared by ``RNN``, ``LSTM`` and ``GRU``, as ``torch.nn.RNNBase``.

    ``mode`` is 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'.

    >>> layer = RNNBase("GRU", 4, 8, num_layers=2)
    >>> [n for n, _ in layer.named_parameters()][:4]
    ['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0']
    """

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional, self.proj_size = bias, batch_first, bidirectional, proj_size
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        self.dropout = float(dropout)
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=2,
            )
        for name, value in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        factory = {"dtype": dtype, "device": device}
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [
                    (f"weight_ih_l{layer}{suffix}", (gate_size, layer_input)),
                    (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden)),
                ]
                if bias:
                    shapes += [(f"bias_ih_l{layer}{suffix}", (gate_size,)), (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size > 0:
                    shapes.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name, Parameter(empty(shape, **factory)))
                names = [name for name, _ in shapes]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters, one list per layer and direction."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Nothing to do: the fused ops read the parameters where they are (PyTorch packs them for cuDNN)."""

    def reset_parameters(self) -> None:
        """Every parameter uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)], in registration order."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    # ------------------------------------------------------------------------------------------------ checks
    def check_input(self, input: Tensor, batch_sizes) -> None:
        weight = self._flat_weights[0]
        if input.dtype != weight.dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight.dtype}). Convert "
                f"input: input.to({weight.dtype}), or convert model: model.to({input.dtype})"
            )
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.size(-1)}"
            )

    def _mini_batch(self, input: Tensor, batch_sizes) -> int:
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return int(input.size(0) if self.batch_first else input.size(1))

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * (2 if self.bidirectional else 1), self._mini_batch(input, batch_sizes), size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple, msg: str = "Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx: Tensor, permutation):
        if permutation is None:
            return hx
        return hx.index_select(1, permutation)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------------------------------------ forward
    def _weights(self) -> list:
        """Per layer and direction: (w_ih, w_hh, b_ih, b_hh, w_hr), None where absent."""
        out = []
        for names in self._all_weights:
            params = [getattr(self, n) for n in names]
            w_ih, w_hh = params[0], params[1]
            b_ih, b_hh = (params[2], params[3]) if self.bias else (None, None)
            w_hr = params[-1] if self.proj_size > 0 else None
            out.append((w_ih, w_hh, b_ih, b_hh, w_hr))
        return out

    def _zeros(self, input: Tensor, batch: int, size: int) -> Tensor:
        return zeros(
            self.num_layers * (2 if self.bidirectional else 1), batch, size, dtype=input.dtype, device=input.device
        )

    def _run(self, input, hx: Tensor | None, cx: Tensor | None, label: str):
        """The common forward: unpack or batch the input, check and order the states, run the layers, put the
        outputs back in the caller's layout."""
        lstm = self.mode == "LSTM"
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        sorted_indices = unsorted_indices = None
        batch_sizes = None
        if packed:
            input, batch_sizes_t, sorted_indices, unsorted_indices = input
            batch_sizes = tuple(int(b) for b in batch_sizes_t.tolist())
            batch = batch_sizes[0]
            if hx is None:
                hx = self._zeros(input, batch, real_hidden)
                cx = self._zeros(input, batch, self.hidden_size) if lstm else None
            else:
                hx = self.permute_hidden(hx, sorted_indices)
                cx = self.permute_hidden(cx, sorted_indices) if lstm else None
            self._check_states(input, hx, cx, batch_sizes)
        else:
            if input.dim() not in (2, 3):
                suffix = " tensor instead" if label == "RNN" else " instead"
                raise ValueError(f"{label}: Expected input to be 2D or 3D, got {input.dim()}D{suffix}")
            batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not batched:
                input = input.unsqueeze(batch_dim)
            batch = int(input.size(batch_dim))
            if hx is None:
                hx = self._zeros(input, batch, real_hidden)
                cx = self._zeros(input, batch, self.hidden_size) if lstm else None
            else:
                self._check_state_dims(hx, cx, batched)
                if not batched:
                    hx = hx.unsqueeze(1)
                    cx = cx.unsqueeze(1) if lstm else None
            self._check_states(input, hx, cx, None)
            if self.batch_first:
                input = input.transpose(0, 1)
        result = recurrent(
            self.mode,
            input,
            hx,
            cx,
            self._weights(),
            self.num_layers,
            self.dropout,
            self.training,
            self.bidirectional,
            batch_sizes,
        )
        output, states = result[0], result[1:]
        if packed:
            output = PackedSequence(output, batch_sizes_t, sorted_indices, unsorted_indices)
        else:
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(batch_dim)
                states = tuple(s.squeeze(1) for s in states)
        states = tuple(self.permute_hidden(s, unsorted_indices) for s in states)
        return output, (states if lstm else states[0])

    def _check_state_dims(self, hx: Tensor, cx, batched: bool) -> None:
        dims = 3 if batched else 2
        kind = "batched 3-D" if batched else "unbatched 2-D"
        if self.mode == "LSTM":
            if hx.dim() != dims or cx.dim() != dims:
                raise RuntimeError(
                    f"For {kind} input, hx and cx should also be {dims}-D but got ({hx.dim()}-D, {cx.dim()}-D) tensors"
                )
        elif hx.dim() != dims:
            raise RuntimeError(f"For {kind} input, hx should also be {dims}-D but got {hx.dim()}-D tensor")

    def _check_states(self, input: Tensor, hx: Tensor, cx, batch_sizes) -> None:
        if self.mode != "LSTM":
            self.check_forward_args(input, hx, batch_sizes)
            return
        self.check_input(input, batch_sizes)
        expected_h = self.get_expected_hidden_size(input, batch_sizes)
        self.check_hidden_size(hx, expected_h, "Expected hidden[0] size {}, got {}")
        expected_c = (
            self.num_layers * (2 if self.bidirectional else 1),
            self._mini_batch(input, batch_sizes),
            self.hidden_size,
        )
        self.check_hidden_size(cx, expected_c, "Expected hidden[1] size {}, got {}")


class RNN(RNNBase):
    """A stack of Elman RNN layers, h' = tanh or relu(x W_ih^T + b_ih + h W_hh^T + b_hh), as ``torch.nn.RNN``.

    ``forward(input, hx=None)`` returns ``(output, h_n)``: output (T, N, D * H) (batch first with ``batch_first``),
    h_n (num_layers * D, N, H); a ``PackedSequence`` input gives a ``PackedSequence`` output.

    >>> import trainkit
    >>> rnn = RNN(10, 20, 2)
    >>> output, h_n = rnn(trainkit.randn(5, 3, 10))
    >>> tuple(output.shape), tuple(h_n.shape)
    ((5, 3, 20), (2, 3, 20))
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):
        return self._run(input, hx, None, "RNN")


class LSTM(RNNBase):
    """A stack of LSTM layers, as ``torch.nn.LSTM``; gates (i, f, g, o) stacked in ``weight_ih_l{k}`` and
    ``weight_hh_l{k}``; with ``proj_size`` > 0, h = (o * tanh(c)) W_hr^T.

    ``forward(input, (h0, c0)=None)`` returns ``(output, (h_n, c_n))``.

    >>> import trainkit
    >>> lstm = LSTM(10, 20, 2)
    >>> output, (h_n, c_n) = lstm(trainkit.randn(5, 3, 10))
    >>> tuple(output.shape), tuple(h_n.shape), tuple(c_n.shape)
    ((5, 3, 20), (2, 3, 20), (2, 3, 20))
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:
        return (
            self.num_layers * (2 if self.bidirectional else 1),
            self._mini_batch(input, batch_sizes),
            self.hidden_size,
        )

    def permute_hidden(self, hx, permutation):
        if permutation is None or isinstance(hx, Tensor):
            return super().permute_hidden(hx, permutation)
        return tuple(super(LSTM, self).permute_hidden(h, permutation) for h in hx)

    def forward(self, input, hx: tuple | None = None):
        h0, c0 = (None, None) if hx is None else hx
        return self._run(input, h0, c0, "LSTM")


class GRU(RNNBase):
    """A stack of GRU layers, as ``torch.nn.GRU``; gates (r, z, n) stacked in ``weight_ih_l{k}`` and
    ``weight_hh_l{k}``, n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)), h' = (1 - z) * n + z * h.

    >>> import trainkit
    >>> gru = GRU(10, 20)
    >>> output, h_n = gru(trainkit.randn(5, 3, 10))
    >>> tuple(output.shape), tuple(h_n.shape)
    ((5, 3, 20), (1, 3, 20))
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):
        return self._run(input, hx, None, "GRU")
