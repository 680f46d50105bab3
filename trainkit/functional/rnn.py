"""Fused recurrent ops: one op per layer and direction over the whole sequence, and the stacking of layers.

Each layer and direction of an ``nn.RNN``, ``nn.LSTM`` or ``nn.GRU`` is one graph node: ``RnnTanhLayerBackward0``,
``RnnReluLayerBackward0``, ``LstmLayerBackward0`` (``rnn_lstm``) or ``GruLayerBackward0`` (``rnn_gru``), as PyTorch
shows one ``MkldnnRnnLayerBackward0`` per layer. Forward does the input projection of every step as one product
(T N, in) x (in, G H), then per step the recurrent product (N, H) x (H, G H) and the gate arithmetic in place.
Backward runs through time by hand in the same node and then forms each weight gradient as one product over all
steps. The arrays backward reads (gates, cell states, hidden states) are the node's saved values: ``saved_tensors``,
``trainkit.autograd.graph`` and the graph explorer list them with their sizes. With ``create_graph=True`` the node
recomputes the layer with ordinary ops and differentiates that, so that second derivatives work.

The plain recurrent layer, per step:  h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh),  act = tanh or relu.
Backward per step in reverse:  da = dh act'(h'),  dh_prev += da W_hh;  then dW_ih = da^T x, dW_hh = da^T h_prev,
dx = da W_ih, db = sum da over all steps at once.
"""

from __future__ import annotations

from ..autograd.autocast import autocast_inputs
from ..autograd.backend import xp_of
from ..autograd.ops.join import cat, stack
from ..autograd.tensor import Tensor
from .dropout import dropout as dropout_fn
from .rnn_gru import GruLayer
from .rnn_lstm import LstmLayer
from .rnn_steps import FusedLayer, Schedule, add_prev, read_prev, run_layer

__all__: list[str] = []


class RnnTanhLayer(FusedLayer, name="RnnTanhLayerBackward0"):
    """One tanh RNN layer and direction over a whole (padded or packed) sequence; see the module docstring."""

    mode = "RNN_TANH"

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, sched):
        self.sched = sched
        xp = xp_of(x)
        last, prev = sched.indices(xp)
        size = w_hh.shape[0]
        total, n, out_at = sched.total, sched.n, sched.out_at
        x2 = x.reshape(total, x.shape[-1])
        gates = xp.matmul(x2, w_ih.T)
        if b_ih is not None:
            gates += b_ih + b_hh
        states = xp.empty((total + n, size), dtype=x.dtype)
        states[sched.h0_at : sched.h0_at + n] = h0
        whT = xp.ascontiguousarray(w_hh.T)  # a transposed operand halves the small product's speed
        rec = xp.empty((n, size), dtype=x.dtype)
        tmp_h = xp.empty((n, size), dtype=x.dtype)
        relu = self.mode == "RNN_RELU"
        for row, b, segments in sched.steps:
            h_prev = read_prev(states, segments, b, tmp_h)
            a = gates[row : row + b]
            r = rec[:b]
            xp.matmul(h_prev, whT, out=r)
            a += r
            h = states[out_at + row : out_at + row + b]
            if relu:
                xp.maximum(a, 0, out=h)
            else:
                xp.tanh(a, out=h)
        self.keep = {"states": states}
        output = states[out_at : out_at + total].reshape(*x.shape[:-1], size)
        return output, states[last]

    def backward_arrays(self, inputs, kept, g_out, g_hn):
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = inputs
        sched = self.sched
        xp = xp_of(g_out)
        last, prev = sched.indices(xp)
        states = kept["states"]
        size = w_hh.shape[0]
        total, n, out_at = sched.total, sched.n, sched.out_at
        dt = states.dtype
        d_states = xp.zeros((total + n, size), dtype=dt)
        d_states[out_at : out_at + total] = g_out.reshape(total, size)
        d_states[last] += g_hn
        d_gates = xp.empty((total, size), dtype=dt)
        u_buf = xp.empty((n, size), dtype=dt)
        mask_buf = xp.empty((n, size), dtype=bool)
        d_prev = xp.empty((n, size), dtype=dt)
        relu = self.mode == "RNN_RELU"
        for row, b, segments in reversed(sched.steps):
            dh = d_states[out_at + row : out_at + row + b]
            h = states[out_at + row : out_at + row + b]
            da = d_gates[row : row + b]
            if relu:
                m = mask_buf[:b]
                xp.greater(h, 0, out=m)
                xp.multiply(dh, m, out=da)
            else:
                u = u_buf[:b]
                xp.multiply(h, h, out=u)
                xp.subtract(1, u, out=u)
                xp.multiply(dh, u, out=da)
            dp = d_prev[:b]
            xp.matmul(da, w_hh, out=dp)
            add_prev(d_states, segments, dp)
        x2 = x.reshape(total, x.shape[-1])
        dx = dh0 = dwi = dwh = dbi = dbh = None
        if self.wants(0):
            dx = xp.matmul(d_gates, w_ih).reshape(x.shape)
        if self.wants(1):
            dh0 = d_states[sched.h0_at : sched.h0_at + n].copy()  # not a view that would keep d_states alive
        if self.wants(3):
            dwi = xp.matmul(d_gates.T, x2)
        if self.wants(4):
            dwh = xp.matmul(d_gates.T, states[prev])
        if b_ih is not None and (self.wants(5) or self.wants(6)):
            db = d_gates.sum(axis=0)
            dbi = db if self.wants(5) else None
            dbh = (db.copy() if dbi is not None else db) if self.wants(6) else None
        return dx, dh0, None, dwi, dwh, dbi, dbh, None


class RnnReluLayer(RnnTanhLayer, name="RnnReluLayerBackward0"):
    """One relu RNN layer and direction over a whole sequence; see the module docstring."""

    mode = "RNN_RELU"


LAYER_OPS = {"RNN_TANH": RnnTanhLayer, "RNN_RELU": RnnReluLayer, "LSTM": LstmLayer, "GRU": GruLayer}
_schedules: dict = {}


def schedule(batch_sizes: tuple, reverse: bool) -> Schedule:
    """The ``Schedule`` of a layer over ``batch_sizes``, made once per distinct shape (a small cache).

    >>> schedule((3, 1), reverse=True) is schedule((3, 1), reverse=True)
    True
    """
    key = (batch_sizes, reverse)
    sched = _schedules.get(key)
    if sched is None:
        if len(_schedules) > 256:
            _schedules.clear()
        sched = _schedules[key] = Schedule(batch_sizes, reverse)
    return sched


def recurrent(
    mode: str,
    input: Tensor,
    hx: Tensor,
    cx,
    weights: list,
    num_layers: int,
    dropout: float,
    training: bool,
    bidirectional: bool,
    batch_sizes: tuple | None = None,
) -> tuple:
    """A stack of recurrent layers over a time-major sequence: ``(output, h_n)``, or ``(output, h_n, c_n)`` for
    ``mode='LSTM'``.

    ``input`` is (T, N, in), or the ``data`` (sum of lengths, in) of a packed batch with ``batch_sizes``; ``hx``
    (and ``cx`` for LSTM) is (num_layers * directions, N, hidden), layer-major; ``weights`` holds, per layer and
    direction in that order, ``(w_ih, w_hh, b_ih, b_hh, w_hr)`` (None where absent). Between layers, in training,
    the output goes through ``dropout``.

    >>> import trainkit
    >>> w = [(trainkit.ones(4, 2), trainkit.ones(4, 4), None, None, None)]
    >>> out, h_n = recurrent("RNN_TANH", trainkit.zeros(3, 1, 2), trainkit.zeros(1, 1, 4), None, w, 1, 0.0,
    ...                      False, False)
    >>> tuple(out.shape), tuple(h_n.shape)
    ((3, 1, 4), (1, 1, 4))
    """
    op = LAYER_OPS[mode]
    directions = 2 if bidirectional else 1
    flat = (input, hx, cx, *(w for ws in weights for w in ws))
    cast = autocast_inputs(mode.lower(), *flat)  # 'lstm', 'rnn_tanh', ...: autocast's names of the layers
    if any(a is not b for a, b in zip(cast, flat)):
        input, hx, cx, rest = cast[0], cast[1], cast[2], iter(cast[3:])
        weights = [tuple(next(rest) for _ in ws) for ws in weights]
    if batch_sizes is None and input.shape[0] == 0:
        raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
    for state in (hx, cx):
        if state is not None and state.dtype != input.dtype:
            raise RuntimeError(
                f"Input and hidden tensors are not the same dtype: input is {input.dtype}, hidden state {state.dtype}"
            )
    if batch_sizes is None:
        batch_sizes = (int(input.shape[1]),) * int(input.shape[0])
    layer_input = input
    h_n, c_n = [], []
    for layer in range(num_layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            w_ih, w_hh, b_ih, b_hh, w_hr = weights[k]
            outs = run_layer(
                op,
                layer_input,
                hx[k],
                cx[k] if cx is not None else None,
                w_ih,
                w_hh,
                b_ih,
                b_hh,
                w_hr,
                schedule(batch_sizes, d == 1),
            )
            outputs.append(outs[0])
            h_n.append(outs[1])
            if cx is not None:
                c_n.append(outs[2])
        layer_input = outputs[0] if directions == 1 else cat(outputs, -1)
        if dropout > 0 and training and layer < num_layers - 1:
            layer_input = dropout_fn(layer_input, dropout, True)
    if cx is not None:
        return layer_input, stack(h_n, 0), stack(c_n, 0)
    return layer_input, stack(h_n, 0)
