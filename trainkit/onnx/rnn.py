"""``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` as ONNX ``RNN``, ``LSTM`` and ``GRU``, one ONNX op per layer.

The gates are stacked in another order: PyTorch's LSTM weights hold the gates as i, f, g, o and ONNX's as
i, o, f, c (c being g); PyTorch's GRU as r, z, n and ONNX's as z, r, h, with ``linear_before_reset=1`` for
PyTorch's n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). The blocks are reordered by ``Split`` and ``Concat`` on
the parameters themselves, so the initializers keep their PyTorch names. Layers stack by feeding one layer's
``Y`` (seq, directions, batch, hidden) to the next as (seq, batch, directions * hidden).
"""

from __future__ import annotations

from .. import layers as nn
from .context import Context

__all__ = ["RNN_CONVERTERS"]

# PyTorch's gate blocks in the order ONNX stacks them
LSTM_ORDER = (0, 3, 1, 2)  # i, f, g, o -> i, o, f, c
GRU_ORDER = (1, 0, 2)  # r, z, n -> z, r, h


def _reordered(cx: Context, param, order: tuple) -> str:
    name = cx.g.value(param)
    if order == tuple(range(len(order))):
        return name
    parts = cx.g.node("Split", [name, cx.g.ints([param.shape[0] // len(order)] * len(order))], outputs=len(order))
    return cx.node("Concat", [parts[i] for i in order], axis=0)


def _stacked(cx: Context, m, kind: str, k: int, order: tuple) -> list:
    """W, R and B of layer ``k`` (both directions), as the ONNX op takes them."""
    suffixes = [""] + (["_reverse"] if m.bidirectional else [])
    ws, rs, bs = [], [], []
    zero = cx.g.ints([0])
    for s in suffixes:
        ws.append(cx.node("Unsqueeze", [_reordered(cx, getattr(m, f"weight_ih_l{k}{s}"), order), zero]))
        rs.append(cx.node("Unsqueeze", [_reordered(cx, getattr(m, f"weight_hh_l{k}{s}"), order), zero]))
        if m.bias:
            b_ih = _reordered(cx, getattr(m, f"bias_ih_l{k}{s}"), order)
            b_hh = _reordered(cx, getattr(m, f"bias_hh_l{k}{s}"), order)
            bs.append(cx.node("Unsqueeze", [cx.node("Concat", [b_ih, b_hh], axis=0), zero]))

    def join(values: list) -> str:
        return values[0] if len(values) == 1 else cx.node("Concat", values, axis=0)

    return [join(ws), join(rs), join(bs) if bs else ""]


def _state_slice(cx: Context, h: str, k: int, dirs: int) -> str:
    return cx.node("Slice", [h, cx.g.ints([k * dirs]), cx.g.ints([(k + 1) * dirs]), cx.g.ints([0])])


def _recurrent(kind: str):
    """The converter of ``nn.RNN`` (``kind='RNN'``), ``nn.LSTM`` or ``nn.GRU``."""
    order = {"LSTM": LSTM_ORDER, "GRU": GRU_ORDER}.get(kind, ())

    def convert(cx: Context) -> None:
        m = cx.rec.module
        x_in = cx.rec.inputs[0]
        if not hasattr(x_in, "shape"):
            raise cx.refuse("a PackedSequence input (pad the batch and pass a tensor)")
        if getattr(m, "proj_size", 0):
            raise cx.refuse("LSTM with proj_size")
        hx = cx.rec.inputs[1] if len(cx.rec.inputs) > 1 else cx.params.get("hx")
        batched = len(x_in.shape) == 3
        x = cx.input(0)
        if not batched:
            x = cx.node("Unsqueeze", [x, cx.g.ints([1])])
        elif m.batch_first:
            x = cx.node("Transpose", [x], perm=[1, 0, 2])
        states = []
        if hx is not None:
            for h in hx if isinstance(hx, tuple) else (hx,):
                name = cx.g.value(h)
                states.append(name if batched else cx.node("Unsqueeze", [name, cx.g.ints([1])]))
        dirs = 2 if m.bidirectional else 1
        hidden = int(m.hidden_size)
        attrs = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward"}
        if kind == "RNN":
            attrs["activations"] = ["Relu" if m.nonlinearity == "relu" else "Tanh"] * dirs
        if kind == "GRU":
            attrs["linear_before_reset"] = 1
        last_h, last_c = [], []
        for k in range(int(m.num_layers)):
            w, r, b = _stacked(cx, m, kind, k, order)
            inputs = [x, w, r, b, ""]
            if states:
                inputs.append(_state_slice(cx, states[0], k, dirs))
                if kind == "LSTM":
                    inputs.append(_state_slice(cx, states[1], k, dirs))
            while inputs[-1] == "":
                inputs.pop()
            outs = cx.g.node(kind, inputs, outputs=3 if kind == "LSTM" else 2, **attrs)
            last_h.append(outs[1])
            if kind == "LSTM":
                last_c.append(outs[2])
            y = cx.node("Transpose", [outs[0]], perm=[0, 2, 1, 3])  # (seq, batch, dirs, hidden)
            x = cx.node("Reshape", [y, cx.g.ints([0, 0, dirs * hidden])])
        out = x
        if not batched:
            out = cx.node("Squeeze", [out, cx.g.ints([1])])
        elif m.batch_first:
            out = cx.node("Transpose", [out], perm=[1, 0, 2])
        finals = [last_h] + ([last_c] if kind == "LSTM" else [])
        names = [out]
        for parts in finals:
            h = parts[0] if len(parts) == 1 else cx.node("Concat", parts, axis=0)
            names.append(h if batched else cx.node("Squeeze", [h, cx.g.ints([1])]))
        cx.bind(names)

    return convert


RNN_CONVERTERS = {nn.RNN: _recurrent("RNN"), nn.LSTM: _recurrent("LSTM"), nn.GRU: _recurrent("GRU")}
