"""The fused GRU layer: one node (``GruLayerBackward0``) per layer and direction over the whole sequence.

Per step, with gates in PyTorch's order (r, z, n) in the stacked weights::

    r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)      z = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)
    n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))   h' = (1 - z) * n + z * h = n + z * (h - n)

The r and z rows of the weights are halved inside, so that sigmoid(a) = (1 + tanh(a / 2)) / 2 takes one ``tanh``
and a multiply-add. Backward, per step in reverse, with dh the step's whole hidden-state gradient::

    da_z = dh (h - n) z (1 - z)      da_n = dh (1 - z) (1 - n^2)      da_r = da_n (h W_hn^T + b_hn) r (1 - r)
    dh_prev = dh z + [da_r, da_z, da_n r] W_hh

and after the loop, over all steps at once: dW_ih = [da_r, da_z, da_n]^T x, dW_hh = [da_r, da_z, da_n r]^T h_prev,
dx = [da_r, da_z, da_n] W_ih, and the bias gradients as sums of the same.
"""

from __future__ import annotations

from ..autograd.backend import xp_of
from .rnn_steps import FusedLayer, add_prev, read_prev

__all__: list[str] = []


class GruLayer(FusedLayer, name="GruLayerBackward0"):
    """One GRU layer and direction over a whole (padded or packed) sequence; see the module docstring."""

    mode = "GRU"

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, sched):
        self.sched = sched
        xp = xp_of(x)
        last, prev = sched.indices(xp)
        size = w_hh.shape[0] // 3
        total, n, out_at = sched.total, sched.n, sched.out_at
        rz = slice(0, 2 * size)
        wi = w_ih.copy()
        wi[rz] *= 0.5
        wh = w_hh.copy()
        wh[rz] *= 0.5
        x2 = x.reshape(total, x.shape[-1])
        gates = xp.matmul(x2, wi.T)  # (total, 3H): the input projection of every step, then r, z, n in place
        b_hn = None
        if b_ih is not None:
            bias = b_ih.copy()
            bias[rz] += b_hh[rz]
            bias[rz] *= 0.5
            gates += bias
            b_hn = b_hh[2 * size :]
        states = xp.empty((total + n, size), dtype=x.dtype)
        states[sched.h0_at : sched.h0_at + n] = h0
        hidden_n = xp.empty((total, size), dtype=x.dtype)  # h W_hn^T + b_hn, which r multiplies
        whT = xp.ascontiguousarray(wh.T)  # a transposed operand halves the small product's speed
        rec = xp.empty((n, 3 * size), dtype=x.dtype)
        tmp = xp.empty((n, size), dtype=x.dtype)
        tmp_h = xp.empty((n, size), dtype=x.dtype)
        tanh, multiply = xp.tanh, xp.multiply
        for row, b, segments in sched.steps:
            h_prev = read_prev(states, segments, b, tmp_h)
            a = gates[row : row + b]
            r = rec[:b]
            xp.matmul(h_prev, whT, out=r)
            s = a[:, rz]
            s += r[:, rz]
            tanh(s, out=s)
            s *= 0.5
            s += 0.5
            hn = hidden_n[row : row + b]
            if b_hn is not None:
                xp.add(r[:, 2 * size :], b_hn, out=hn)
            else:
                hn[...] = r[:, 2 * size :]
            nn = a[:, 2 * size :]
            t = tmp[:b]
            multiply(a[:, :size], hn, out=t)
            nn += t
            tanh(nn, out=nn)
            xp.subtract(h_prev, nn, out=t)
            t *= a[:, size : 2 * size]
            xp.add(nn, t, out=states[out_at + row : out_at + row + b])
        self.keep = {"states": states, "gates": gates, "hidden_n": hidden_n}
        output = states[out_at : out_at + total].reshape(*x.shape[:-1], size)
        return output, states[last]

    def backward_arrays(self, inputs, kept, g_out, g_hn):
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = inputs
        sched = self.sched
        xp = xp_of(g_out)
        last, prev = sched.indices(xp)
        states, gates, hidden_n = kept["states"], kept["gates"], kept["hidden_n"]
        size = w_hh.shape[0] // 3
        total, n, out_at = sched.total, sched.n, sched.out_at
        dt = states.dtype
        d_states = xp.zeros((total + n, size), dtype=dt)
        d_states[out_at : out_at + total] = g_out.reshape(total, size)
        d_states[last] += g_hn
        # columns [da_n r | da_r | da_z | da_n]: the input side reads the last three (PyTorch's order r, z, n), the
        # recurrent side the first three (in the order n, r, z of the rows of wh)
        wh = xp.concatenate((w_hh[2 * size :], w_hh[: 2 * size]))
        d_gates = xp.empty((total, 4 * size), dtype=dt)
        # what does not depend on the gradient flowing back is computed for all steps at once, before the loop:
        # [da_z, da_n] = dh * zn_factors and [da_n r, da_r] = da_n * r_factors
        r, z, nn = gates[:, :size], gates[:, size : 2 * size], gates[:, 2 * size :]
        subtract, multiply = xp.subtract, xp.multiply
        zn_factors = xp.empty((total, 2, size), dtype=dt)
        p_z, p_n = zn_factors[:, 0], zn_factors[:, 1]
        subtract(states[prev], nn, out=p_z)
        p_z *= z
        u = subtract(1, z)
        p_z *= u
        multiply(nn, nn, out=p_n)
        subtract(1, p_n, out=p_n)
        p_n *= u
        r_factors = xp.empty((total, 2, size), dtype=dt)
        r_factors[:, 0] = r
        subtract(1, r, out=r_factors[:, 1])
        r_factors[:, 1] *= r
        r_factors[:, 1] *= hidden_n
        t1 = xp.empty((n, size), dtype=dt)
        d_prev = xp.empty((n, size), dtype=dt)
        for row, b, segments in reversed(sched.steps):
            dh = d_states[out_at + row : out_at + row + b]
            d = d_gates[row : row + b]
            d3 = d.reshape(b, 4, size)
            multiply(dh[:, None, :], zn_factors[row : row + b], out=d3[:, 2:])
            multiply(d3[:, 3:], r_factors[row : row + b], out=d3[:, :2])
            dp = d_prev[:b]
            xp.matmul(d[:, : 3 * size], wh, out=dp)
            u = t1[:b]
            multiply(dh, z[row : row + b], out=u)
            dp += u
            add_prev(d_states, segments, dp)
        d_in = d_gates[:, size:]  # (r, z, n), PyTorch's order
        d_rec = d_gates[:, : 3 * size]  # (n, r, z)
        x2 = x.reshape(total, x.shape[-1])
        dx = dh0 = dwi = dwh = dbi = dbh = None
        if self.wants(0):
            dx = xp.matmul(d_in, w_ih).reshape(x.shape)
        if self.wants(1):
            dh0 = d_states[sched.h0_at : sched.h0_at + n].copy()  # not a view that would keep d_states alive
        if self.wants(3):
            dwi = xp.matmul(d_in.T, x2)
        if self.wants(4):
            d = xp.matmul(d_rec.T, states[prev])
            dwh = xp.concatenate((d[size:], d[:size]))
        if b_ih is not None:
            if self.wants(5):
                dbi = d_in.sum(axis=0)
            if self.wants(6):
                sums = d_rec.sum(axis=0)
                dbh = xp.concatenate((sums[size:], sums[:size]))
        return dx, dh0, None, dwi, dwh, dbi, dbh, None
