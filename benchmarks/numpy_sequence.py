"""The NumPy limit of W6 (GPT step) and W7 (LSTM language-model step): forward and backward written by hand.

As in benchmarks/numpy_limit.py: no autograd and no graph, only the array operations the math needs, with every
layer's gradient written out. Each class takes its initial weights under the names of PyTorch's ``state_dict`` of
the model in benchmarks/sequence_steps.py, copied, and keeps the current weights there; every array keeps the
weights' dtype (float32 in the suite, float64 for a check). ``xp`` is ``numpy`` or ``cupy``. NumPy has no erf,
which the exact GELU needs: it is trainkit's, written in NumPy (CuPy has one): for float32 its single rational
function (``erf_rational``), computed once in the forward, as trainkit's GELU does.
"""

from __future__ import annotations

import math

import numpy

from benchmarks.numpy_limit import cross_entropy
from trainkit.autograd.ops.erf import erf as numpy_erf
from trainkit.autograd.ops.erf import erf_rational


def _erf(x, xp):
    if xp is numpy:
        return erf_rational(x) if x.dtype == numpy.float32 else numpy_erf(x)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(x)


def _embedding_backward(g, idx, rows: int, xp):
    """The gradient of a (rows, E) table looked up at ``idx``: each row the sum of the output rows that took it."""
    grad = xp.zeros((rows, g.shape[-1]), dtype=g.dtype)
    xp.add.at(grad, idx.reshape(-1), g.reshape(-1, g.shape[-1]))
    return grad


def _layer_norm(x, w, b, xp, eps: float = 1e-5):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last axis (var biased); returns y, xhat, 1/sqrt(...)."""
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1 / xp.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xc *= rstd
    return xc * w + b, xc, rstd


def _layer_norm_backward(g, xhat, rstd, w, name: str, grads: dict):
    """dw = sum(g * xhat), db = sum(g); dx = rstd (d - mean(d) - xhat mean(d xhat)) with d = g w."""
    grads[name + ".weight"] = (g * xhat).reshape(-1, xhat.shape[-1]).sum(axis=0)
    grads[name + ".bias"] = g.reshape(-1, g.shape[-1]).sum(axis=0)
    d = g * w
    dx = d - d.mean(axis=-1, keepdims=True)
    dx -= xhat * (d * xhat).mean(axis=-1, keepdims=True)
    dx *= rstd
    return dx


def _linear_backward(g, x, w, name: str, grads: dict):
    """For out = x @ w.T + b on (M, in): dw = g.T @ x, db = sum of g over M; returns dx = g @ w."""
    grads[name + ".weight"] = g.T @ x
    grads[name + ".bias"] = g.sum(axis=0)
    return g @ w


def _sigmoid(x, xp):
    """In place: sigmoid(x) = (1 + tanh(x / 2)) / 2, which no x overflows."""
    x *= 0.5
    xp.tanh(x, out=x)
    x += 1
    x *= 0.5
    return x


class GPTStep:
    """W6: one AdamW step (PyTorch's defaults: betas 0.9, 0.999, eps 1e-8, weight decay 0.01) of the pre-norm GPT
    on the mean cross-entropy of every position's next token.

    x = wte[idx] + wpe[t]; per block x += proj(attn(ln_1(x))), x += fc_out(gelu(fc(ln_2(x)))), with attn the
    causal softmax attention of the heads of qkv(.) = [q, k, v]: P = softmax(q k^T / sqrt(d) + mask), y = P v;
    logits = ln_f(x) @ wte.T (the head tied to the token embedding).
    Backward of attention: dv = P^T dy, dP = dy v^T, dS = P (dP - rowsum(dP P)), dq = dS k / sqrt(d),
    dk = dS^T q / sqrt(d); of gelu(a) = a Phi(a): Phi(a) + a phi(a). The tied table's gradient is the head's
    plus the lookup's.
    """

    def __init__(
        self,
        params: dict,
        heads: int,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        xp=numpy,
    ):
        self.xp, self.heads, self.lr, self.betas, self.eps, self.weight_decay = xp, heads, lr, betas, eps, weight_decay
        self.params = {k: xp.array(v) for k, v in params.items() if k != "head.weight"}
        self.params["head.weight"] = self.params["wte.weight"]  # tied: one array under both names
        self.layers = 1 + max(int(k.split(".")[1]) for k in params if k.startswith("blocks."))
        self.moments: dict = {}
        self.steps = 0

    def step(self, idx, y) -> float:
        xp, p = self.xp, self.params
        b, t = idx.shape
        c = p["wte.weight"].shape[1]
        nh, hd = self.heads, c // self.heads
        scale = 1 / math.sqrt(hd)
        mask = xp.triu(xp.full((t, t), -xp.inf, dtype=p["wte.weight"].dtype), 1)
        x = p["wte.weight"][idx] + p["wpe.weight"][:t]
        saved = []
        for i in range(self.layers):
            n = f"blocks.{i}."
            h1, xhat1, rstd1 = _layer_norm(x, p[n + "ln_1.weight"], p[n + "ln_1.bias"], xp)
            qkv = h1.reshape(b * t, c) @ p[n + "qkv.weight"].T
            qkv += p[n + "qkv.bias"]
            q, k, v = qkv.reshape(b, t, 3, nh, hd).transpose(2, 0, 3, 1, 4)
            s = q @ k.transpose(0, 1, 3, 2)
            s *= scale
            s += mask
            s -= s.max(axis=-1, keepdims=True)
            probs = xp.exp(s, out=s)
            probs /= probs.sum(axis=-1, keepdims=True)
            att = (probs @ v).transpose(0, 2, 1, 3).reshape(b * t, c)
            out = att @ p[n + "proj.weight"].T
            out += p[n + "proj.bias"]
            x = x + out.reshape(b, t, c)
            h2, xhat2, rstd2 = _layer_norm(x, p[n + "ln_2.weight"], p[n + "ln_2.bias"], xp)
            h2 = h2.reshape(b * t, c)
            a = h2 @ p[n + "fc.weight"].T
            a += p[n + "fc.bias"]
            phi = _erf(a * (1 / math.sqrt(2)), xp)
            phi += 1
            phi *= 0.5  # Phi(a), the normal distribution function
            gl = a * phi
            out = gl @ p[n + "fc_out.weight"].T
            out += p[n + "fc_out.bias"]
            x = x + out.reshape(b, t, c)
            saved.append((h1.reshape(b * t, c), xhat1, rstd1, q, k, v, probs, att, h2, xhat2, rstd2, a, phi, gl))
        hf, xhatf, rstdf = _layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], xp)
        hf = hf.reshape(b * t, c)
        loss, g = cross_entropy(hf @ p["wte.weight"].T, y.reshape(-1), xp)

        grads: dict = {}
        grad_wte = g.T @ hf
        g = _layer_norm_backward((g @ p["wte.weight"]).reshape(b, t, c), xhatf, rstdf, p["ln_f.weight"], "ln_f", grads)
        for i in reversed(range(self.layers)):
            n = f"blocks.{i}."
            h1, xhat1, rstd1, q, k, v, probs, att, h2, xhat2, rstd2, a, phi, gl = saved[i]
            g2 = g.reshape(b * t, c)
            dgl = _linear_backward(g2, gl, p[n + "fc_out.weight"], n + "fc_out", grads)
            da = xp.exp(-0.5 * a * a)
            da *= a * (1 / math.sqrt(2 * math.pi))
            da += phi
            da *= dgl
            dh2 = _linear_backward(da, h2, p[n + "fc.weight"], n + "fc", grads)
            g = g + _layer_norm_backward(dh2.reshape(b, t, c), xhat2, rstd2, p[n + "ln_2.weight"], n + "ln_2", grads)
            datt = _linear_backward(g.reshape(b * t, c), att, p[n + "proj.weight"], n + "proj", grads)
            dy = datt.reshape(b, t, nh, hd).transpose(0, 2, 1, 3)
            dqkv = xp.empty((3, b, nh, t, hd), dtype=g.dtype)
            dqkv[2] = probs.transpose(0, 1, 3, 2) @ dy
            dp = dy @ v.transpose(0, 1, 3, 2)
            dp -= (dp * probs).sum(axis=-1, keepdims=True)
            dp *= probs
            dp *= scale
            dqkv[0] = dp @ k
            dqkv[1] = dp.transpose(0, 1, 3, 2) @ q
            dqkv = dqkv.transpose(1, 3, 0, 2, 4).reshape(b * t, 3 * c)
            dh1 = _linear_backward(dqkv, h1, p[n + "qkv.weight"], n + "qkv", grads)
            g = g + _layer_norm_backward(dh1.reshape(b, t, c), xhat1, rstd1, p[n + "ln_1.weight"], n + "ln_1", grads)
        grad_wte += _embedding_backward(g, idx, grad_wte.shape[0], xp)
        grads["wte.weight"] = grad_wte
        grads["wpe.weight"] = xp.zeros_like(p["wpe.weight"])
        grads["wpe.weight"][:t] = g.sum(axis=0)
        self._adamw(grads)
        return float(loss)

    def _adamw(self, grads: dict) -> None:
        """PyTorch's AdamW, in place: p *= 1 - lr wd; m, v the moving averages of g and g^2;
        p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
        xp, (b1, b2) = self.xp, self.betas
        self.steps += 1
        step_size = self.lr / (1 - b1**self.steps)
        root_bias2 = math.sqrt(1 - b2**self.steps)
        for name, g in grads.items():
            p = self.params[name]
            if name not in self.moments:
                self.moments[name] = (xp.zeros_like(p), xp.zeros_like(p))
            m, v = self.moments[name]
            p *= 1 - self.lr * self.weight_decay
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            denom = xp.sqrt(v)
            denom /= root_bias2
            denom += self.eps
            p -= step_size * m / denom


class LSTMStep:
    """W7: one SGD step (no momentum) after clipping the gradients' total norm, of Embedding - LSTM layers - Linear
    on the mean cross-entropy, the (h, c) state carried from the previous call without its gradient.

    LSTM layer, gates in the order (i, f, g, o): z_t = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh (the inputs' part
    of every step in one product); i, f, o = sigmoid, g = tanh of z_t's quarters; c_t = f c_{t-1} + i g,
    h_t = o tanh(c_t). Backward through time, from dh = dc = 0 after the last step (the carried state is
    detached): dh_t += dh; do = dh_t tanh(c_t); dc += dh_t o (1 - tanh^2 c_t); di = dc g; df = dc c_{t-1};
    dg = dc i; dz = the gates' derivatives times these; dc = dc f; dh = dz W_hh. Then dW_ih = dz^T x,
    dW_hh = dz^T h_{t-1} and db = sum of dz, each one product over all steps. Clipping: every gradient times
    min(1, clip / (total norm + 1e-6)).
    """

    def __init__(self, params: dict, layers: int, lr: float = 20.0, clip: float = 0.25, xp=numpy):
        self.xp, self.layers, self.lr, self.clip = xp, layers, lr, clip
        self.params = {k: xp.array(v) for k, v in params.items()}
        self.state = None

    def step(self, idx, y) -> float:
        xp, p = self.xp, self.params
        steps, n = idx.shape
        hidden = p["rnn.weight_hh_l0"].shape[1]
        if self.state is None:
            self.state = xp.zeros((2, self.layers, n, hidden), dtype=p["encoder.weight"].dtype)
        h0, c0 = self.state
        x = p["encoder.weight"][idx]
        saved = []
        new_state = xp.empty_like(self.state)
        for layer in range(self.layers):
            z, hs, cs, tcs = self._layer_forward(x, h0[layer], c0[layer], layer)
            saved.append((x, z, hs, cs, tcs))
            new_state[0, layer], new_state[1, layer] = hs[-1], cs[-1]
            x = hs
        self.state = new_state
        flat = x.reshape(steps * n, hidden)
        logits = flat @ p["decoder.weight"].T
        logits += p["decoder.bias"]
        loss, g = cross_entropy(logits, y, xp)

        grads: dict = {}
        g = _linear_backward(g, flat, p["decoder.weight"], "decoder", grads).reshape(steps, n, hidden)
        for layer in reversed(range(self.layers)):
            g = self._layer_backward(g, *saved[layer], h0[layer], c0[layer], layer, grads)
        grads["encoder.weight"] = _embedding_backward(g, idx, p["encoder.weight"].shape[0], xp)
        total = math.sqrt(sum(float((gr * gr).sum()) for gr in grads.values()))
        coef = min(1.0, self.clip / (total + 1e-6))
        for name, gr in grads.items():
            gr *= coef * self.lr
            p[name] -= gr
        return float(loss)

    def _layer_forward(self, x, h, c, layer: int):
        xp, p = self.xp, self.params
        steps, n, width = x.shape
        w_hh = p[f"rnn.weight_hh_l{layer}"]
        hidden = w_hh.shape[1]
        z = (x.reshape(steps * n, width) @ p[f"rnn.weight_ih_l{layer}"].T).reshape(steps, n, 4 * hidden)
        z += p[f"rnn.bias_ih_l{layer}"] + p[f"rnn.bias_hh_l{layer}"]
        hs = xp.empty((steps, n, hidden), dtype=x.dtype)
        cs, tcs = xp.empty_like(hs), xp.empty_like(hs)
        w_hh_t = xp.ascontiguousarray(w_hh.T)  # a transposed operand slows the small per-step product
        for t in range(steps):
            zt = z[t]  # becomes the gates (i, f, g, o), kept for the backward
            zt += h @ w_hh_t
            _sigmoid(zt[:, : 2 * hidden], xp)
            xp.tanh(zt[:, 2 * hidden : 3 * hidden], out=zt[:, 2 * hidden : 3 * hidden])
            _sigmoid(zt[:, 3 * hidden :], xp)
            c = zt[:, hidden : 2 * hidden] * c
            c += zt[:, :hidden] * zt[:, 2 * hidden : 3 * hidden]
            cs[t] = c
            xp.tanh(c, out=tcs[t])
            h = hs[t]
            xp.multiply(zt[:, 3 * hidden :], tcs[t], out=h)
        return z, hs, cs, tcs

    def _layer_backward(self, dhs, x, gates, hs, cs, tcs, h0, c0, layer: int, grads: dict):
        xp, p = self.xp, self.params
        steps, n, width = x.shape
        w_hh = p[f"rnn.weight_hh_l{layer}"]
        hidden = w_hh.shape[1]
        dz = xp.empty_like(gates)
        dh = xp.zeros((n, hidden), dtype=x.dtype)
        dc = xp.zeros_like(dh)
        for t in reversed(range(steps)):
            i, f = gates[t, :, :hidden], gates[t, :, hidden : 2 * hidden]
            g, o = gates[t, :, 2 * hidden : 3 * hidden], gates[t, :, 3 * hidden :]
            dh += dhs[t]
            tc = tcs[t]
            dc += dh * o * (1 - tc * tc)
            di, df, dg, do = (dz[t, :, k * hidden : (k + 1) * hidden] for k in range(4))
            xp.multiply(dc, g, out=di)
            di *= i * (1 - i)
            xp.multiply(dc, cs[t - 1] if t else c0, out=df)
            df *= f * (1 - f)
            xp.multiply(dc, i, out=dg)
            dg *= 1 - g * g
            xp.multiply(dh, tc, out=do)
            do *= o * (1 - o)
            dc *= f
            dh = dz[t] @ w_hh
        dz2 = dz.reshape(steps * n, 4 * hidden)
        previous = xp.concatenate([h0[None], hs[:-1]]).reshape(steps * n, hidden)
        grads[f"rnn.weight_ih_l{layer}"] = dz2.T @ x.reshape(steps * n, width)
        grads[f"rnn.weight_hh_l{layer}"] = dz2.T @ previous
        grads[f"rnn.bias_ih_l{layer}"] = dz2.sum(axis=0)
        grads[f"rnn.bias_hh_l{layer}"] = grads[f"rnn.bias_ih_l{layer}"].copy()
        return (dz2 @ p[f"rnn.weight_ih_l{layer}"]).reshape(steps, n, width)
