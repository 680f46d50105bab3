"""The fused LSTM layer: one node (``LstmLayerBackward0``) per layer and direction over the whole sequence.

Per step, with gates in PyTorch's order (i, f, g, o) in the stacked weights::

    a = x W_ih^T + b_ih + h W_hh^T + b_hh
    i, f, o = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)
    c' = f * c + i * g;  h' = o * tanh(c')       (with proj_size: h' = (o * tanh(c')) W_hr^T)

Inside, the gates are kept in the order (i, f, o, g), and the rows of the sigmoid gates in the weights are halved,
so that one ``tanh`` over all four gates, then a multiply and an add, give sigmoid(a) = (1 + tanh(a / 2)) / 2 for
three of them. The input projection of all steps is one product before the loop; per step only the recurrent
product and the gate arithmetic run, on preallocated arrays.

Backward, per step in reverse, with dh the step's whole hidden-state gradient (from the output and the next step)::

    dh_r = dh W_hr (proj)   da_o = dh_r tanh(c') o (1 - o)   dc = dc' + dh_r o (1 - tanh(c')^2)
    da_i = dc g i (1 - i)   da_f = dc c f (1 - f)            da_g = dc i (1 - g^2)
    dc_prev = dc f          dh_prev += da W_hh

where the factors multiplying dc and dh_r are formed for all steps at once before the loop; and after the loop,
over all steps at once: dW_hh = da^T h_prev, dW_ih = da^T x, dx = da W_ih, db = sum da, dW_hr = dh^T (o tanh(c')).
"""

from __future__ import annotations

import numpy as np

from ..autograd.backend import xp_of
from .rnn_steps import FusedLayer, add_prev, read_prev

__all__: list[str] = []


def gate_order(size: int, xp=np):
    """Row indices taking PyTorch's (i, f, g, o) gate blocks of ``size`` rows to (i, f, o, g).

    >>> gate_order(1).tolist()
    [0, 1, 3, 2]
    """
    return xp.concatenate((xp.arange(0, 2 * size), xp.arange(3 * size, 4 * size), xp.arange(2 * size, 3 * size)))


def from_gate_order(grad, order, xp):
    """A gradient computed in (i, f, o, g) row order, put back into PyTorch's (i, f, g, o).

    >>> from_gate_order(np.array([0, 1, 3, 2]), gate_order(1), np).tolist()
    [0, 1, 2, 3]
    """
    out = xp.empty_like(grad)
    out[order] = grad
    return out


class LstmLayer(FusedLayer, name="LstmLayerBackward0"):
    """One LSTM layer and direction over a whole (padded or packed) sequence; see the module docstring."""

    mode = "LSTM"

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, sched):
        self.sched = sched
        xp = xp_of(x)
        last, prev = sched.indices(xp)
        size = w_hh.shape[0] // 4
        out_size = w_hh.shape[1]
        total, n = sched.total, sched.n
        order = gate_order(size, xp)
        half = slice(0, 3 * size)
        wi = w_ih[order]
        wi[half] *= 0.5
        wh = w_hh[order]
        wh[half] *= 0.5
        x2 = x.reshape(total, x.shape[-1])
        gates = xp.matmul(x2, wi.T)  # (total, 4H): the input projection of every step, then the gates in place
        if b_ih is not None:
            bias = (b_ih + b_hh)[order]
            bias[half] *= 0.5
            gates += bias
        states = xp.empty((total + n, out_size), dtype=x.dtype)  # h0 and every step's h, see Schedule
        states[sched.h0_at : sched.h0_at + n] = h0
        cells = xp.empty((total + n, size), dtype=x.dtype)
        cells[sched.h0_at : sched.h0_at + n] = c0
        tanh_c = xp.empty((total, size), dtype=x.dtype)
        hr = xp.empty((total, size), dtype=x.dtype) if w_hr is not None else None
        whT = xp.ascontiguousarray(wh.T)  # a transposed operand halves the small product's speed
        whrT = xp.ascontiguousarray(w_hr.T) if w_hr is not None else None
        rec = xp.empty((n, 4 * size), dtype=x.dtype)
        tmp = xp.empty((n, size), dtype=x.dtype)
        tmp_h = xp.empty((n, out_size), dtype=x.dtype)
        tmp_c = xp.empty((n, size), dtype=x.dtype)
        tanh, multiply = xp.tanh, xp.multiply
        out_at = sched.out_at
        for row, b, segments in sched.steps:
            h_prev = read_prev(states, segments, b, tmp_h)
            c_prev = read_prev(cells, segments, b, tmp_c)
            a = gates[row : row + b]
            r = rec[:b]
            xp.matmul(h_prev, whT, out=r)
            a += r
            tanh(a, out=a)
            s = a[:, half]
            s *= 0.5
            s += 0.5
            c = cells[out_at + row : out_at + row + b]
            multiply(a[:, size : 2 * size], c_prev, out=c)
            t = tmp[:b]
            multiply(a[:, :size], a[:, 3 * size :], out=t)
            c += t
            tc = tanh_c[row : row + b]
            tanh(c, out=tc)
            h = states[out_at + row : out_at + row + b]
            if whrT is None:
                multiply(a[:, 2 * size : 3 * size], tc, out=h)
            else:
                p = hr[row : row + b]
                multiply(a[:, 2 * size : 3 * size], tc, out=p)
                xp.matmul(p, whrT, out=h)
        self.keep = {"states": states, "cells": cells, "gates": gates, "tanh_c": tanh_c}
        if hr is not None:
            self.keep["proj_input"] = hr
        output = states[out_at : out_at + total].reshape(*x.shape[:-1], out_size)
        return output, states[last], cells[last]

    def backward_arrays(self, inputs, kept, g_out, g_hn, g_cn):
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = inputs
        sched = self.sched
        xp = xp_of(g_out)
        last, prev = sched.indices(xp)
        states, cells, gates, tanh_c = kept["states"], kept["cells"], kept["gates"], kept["tanh_c"]
        hr = kept.get("proj_input")
        size = w_hh.shape[0] // 4
        out_size = w_hh.shape[1]
        total, n, out_at = sched.total, sched.n, sched.out_at
        dt = states.dtype
        order = gate_order(size, xp)
        wh = w_hh[order]
        d_states = xp.zeros((total + n, out_size), dtype=dt)
        d_states[out_at : out_at + total] = g_out.reshape(total, out_size)
        d_states[last] += g_hn
        d_cells = xp.zeros((total + n, size), dtype=dt)
        d_cells[last] += g_cn
        d_gates = xp.empty((total, 4 * size), dtype=dt)
        # what does not depend on the gradient flowing back is computed for all steps at once, before the loop:
        # da = dc * factors for i, f, g, da_o = dh_r * factors_o, and dc gains dh_r * keep_c
        i, f, o, g = (gates[:, k * size : (k + 1) * size] for k in range(4))
        factors = xp.empty((total, 4 * size), dtype=dt)
        p_i, p_f, p_o, p_g = (factors[:, k * size : (k + 1) * size] for k in range(4))
        subtract, multiply = xp.subtract, xp.multiply
        subtract(1, i, out=p_i)
        p_i *= i
        p_i *= g
        subtract(1, f, out=p_f)
        p_f *= f
        p_f *= cells[prev]
        subtract(1, o, out=p_o)
        p_o *= o
        p_o *= tanh_c
        multiply(g, g, out=p_g)
        subtract(1, p_g, out=p_g)
        p_g *= i
        keep_c = multiply(tanh_c, tanh_c)
        subtract(1, keep_c, out=keep_c)
        keep_c *= o
        factors3 = factors.reshape(total, 4, size)
        t1 = xp.empty((n, size), dtype=dt)
        t_r = xp.empty((n, size), dtype=dt)
        d_prev = xp.empty((n, out_size), dtype=dt)
        for row, b, segments in reversed(sched.steps):
            dh = d_states[out_at + row : out_at + row + b]
            if w_hr is not None:
                dh = xp.matmul(dh, w_hr, out=t_r[:b])
            u = t1[:b]
            multiply(dh, keep_c[row : row + b], out=u)
            dc = d_cells[out_at + row : out_at + row + b]
            dc += u
            da = d_gates[row : row + b]
            multiply(factors3[row : row + b], dc[:, None, :], out=da.reshape(b, 4, size))
            multiply(dh, p_o[row : row + b], out=da[:, 2 * size : 3 * size])
            multiply(dc, f[row : row + b], out=u)
            add_prev(d_cells, segments, u)
            dp = d_prev[:b]
            xp.matmul(da, wh, out=dp)
            add_prev(d_states, segments, dp)
        prev = states[prev]
        x2 = x.reshape(total, x.shape[-1])
        dx = dh0 = dc0 = dwi = dwh = dbi = dbh = dwr = None
        if self.wants(0):
            dx = xp.matmul(d_gates, w_ih[order]).reshape(x.shape)
        if self.wants(1):
            dh0 = d_states[sched.h0_at : sched.h0_at + n].copy()  # not a view that would keep d_states alive
        if self.wants(2):
            dc0 = d_cells[sched.h0_at : sched.h0_at + n].copy()
        if self.wants(3):
            dwi = from_gate_order(xp.matmul(d_gates.T, x2), order, xp)
        if self.wants(4):
            dwh = from_gate_order(xp.matmul(d_gates.T, prev), order, xp)
        if b_ih is not None and (self.wants(5) or self.wants(6)):
            db = from_gate_order(d_gates.sum(axis=0), order, xp)
            dbi = db if self.wants(5) else None
            dbh = (db.copy() if dbi is not None else db) if self.wants(6) else None
        if w_hr is not None and self.wants(7):
            dwr = xp.matmul(d_states[out_at : out_at + total].T, hr)
        return dx, dh0, dc0, dwi, dwh, dbi, dbh, dwr
