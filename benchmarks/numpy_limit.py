"""The limit a NumPy framework can reach: the benchmark workloads with forward and backward written by hand.

No autograd and no graph: each step is the plain sequence of array operations that the math needs, with the
gradients of every layer written out. This is what any framework on NumPy (or CuPy) pays at least for the same
computation, so the suite reports every implementation against it.

Every class takes its initial weights as ``params`` under the names of PyTorch's ``state_dict`` of the equivalent
``nn.Sequential`` (copied, as float32) and keeps the current weights there. ``xp`` is ``numpy`` or ``cupy``; only
functions both have are used, and every array stays float32.

Convolutions use im2col laid out as (N, C*KH*KW, OH*OW), so that a layer is one batched matrix product already in
the output's layout, and col2im as one strided slice addition per kernel tap.
"""

from __future__ import annotations

import numpy

# ------------------------------------------------------------------------------------------------- helpers


def _copy_params(params: dict, xp) -> dict:
    return {name: xp.array(value, dtype=xp.float32) for name, value in params.items()}


def _sgd(params: dict, grads: dict, bufs: dict, lr: float, momentum: float, xp) -> None:
    """PyTorch's SGD, in place: buf = momentum * buf + grad (buf = grad at the first step); p -= lr * buf.

    Each grad array is used up: it takes lr * buf before the update.
    """
    for name, grad in grads.items():
        step = grad
        if momentum:
            buf = bufs.get(name)
            if buf is None:
                bufs[name] = buf = grad.copy()
            else:
                buf *= momentum
                buf += grad
            step = buf
        xp.multiply(step, lr, out=grad)
        params[name] -= grad


def cross_entropy(logits, y, xp):
    """Mean cross-entropy of (N, K) logits against integer targets, and its gradient (softmax - onehot) / N."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = xp.exp(shifted)
    total = probs.sum(axis=1, keepdims=True)
    rows = xp.arange(n)
    loss = (xp.log(total[:, 0]) - shifted[rows, y]).mean()
    probs /= total
    probs[rows, y] -= 1
    probs /= n
    return loss, probs


def _linear_backward(g, x, w, name: str, grads: dict, need_input: bool = True):
    """For out = x @ w.T + b: records dw = g.T @ x and db = sum of g over the batch; returns dx = g @ w."""
    grads[name + ".weight"] = g.T @ x
    grads[name + ".bias"] = g.sum(axis=0)
    return g @ w if need_input else None


def _im2col(x, kh: int, kw: int, pad: int, xp):
    """(N, C, H, W) -> (N, C*KH*KW, OH*OW) for stride 1: column l holds the window of output position l."""
    n, c, h, w = x.shape
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    if pad:
        padded = xp.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=x.dtype)
        padded[:, :, pad : pad + h, pad : pad + w] = x
    else:
        padded = xp.ascontiguousarray(x)
    s = padded.strides
    # all windows as one strided view (N, C, KH, KW, OH, OW); one copy lays them out for the matmul
    windows = xp.lib.stride_tricks.as_strided(padded, (n, c, kh, kw, oh, ow), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return xp.ascontiguousarray(windows).reshape(n, c * kh * kw, oh * ow)


def _col2im(col, shape: tuple, kh: int, kw: int, pad: int, xp):
    """The adjoint of ``_im2col``: (N, C*KH*KW, OH*OW) -> (N, C, H, W), one slice addition per kernel tap."""
    n, c, h, w = shape
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    out = xp.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=col.dtype)
    taps = col.reshape(n, c, kh, kw, oh, ow)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i : i + oh, j : j + ow] += taps[:, :, i, j]
    return out[:, :, pad : pad + h, pad : pad + w]


def _conv_forward(x, w, b, pad: int, xp):
    """Conv2d, stride 1: out[n] = W2d @ col[n] + b, with W2d = w as (OC, C*KH*KW). Returns out and col."""
    n, _, h, wd = x.shape
    oc, _, kh, kw = w.shape
    col = _im2col(x, kh, kw, pad, xp)
    out = w.reshape(oc, -1) @ col
    out += b[:, None]
    return out.reshape(n, oc, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1), col


def _conv_backward(g, col, w, x_shape, pad: int, xp, need_input: bool = True):
    """For out = W2d @ col + b: dW = sum over n of g[n] @ col[n].T, db = sum of g, dx = col2im(W2d.T @ g)."""
    n, oc = g.shape[:2]
    _, _, kh, kw = w.shape
    g3 = g.reshape(n, oc, -1)
    grad_w = (g3 @ col.transpose(0, 2, 1)).sum(axis=0).reshape(w.shape)
    grad_b = g3.sum(axis=(0, 2))
    grad_x = _col2im(w.reshape(oc, -1).T @ g3, x_shape, kh, kw, pad, xp) if need_input else None
    return grad_x, grad_w, grad_b


def _relu_pool_forward(z, xp):
    """ReLU in place on z (N, C, H, W), then 2x2 max-pool with stride 2: the max of the four taps of each window."""
    xp.maximum(z, 0, out=z)
    out = xp.maximum(z[:, :, 0::2, 0::2], z[:, :, 0::2, 1::2])
    xp.maximum(out, z[:, :, 1::2, 0::2], out=out)
    xp.maximum(out, z[:, :, 1::2, 1::2], out=out)
    return out


def _relu_pool_backward(g, r, out, xp):
    """Gradient through ``_relu_pool_forward`` (r its ReLU output, out its result): each window's gradient goes
    to its first maximum in row-major order, as PyTorch's; the ReLU mask there is out > 0."""
    remaining = g * (out > 0)
    grad = xp.empty(r.shape, dtype=g.dtype)
    for rows, cols in (
        (slice(0, None, 2), slice(0, None, 2)),
        (slice(0, None, 2), slice(1, None, 2)),
        (slice(1, None, 2), slice(0, None, 2)),
    ):
        taken = grad[:, :, rows, cols]
        xp.multiply(remaining, r[:, :, rows, cols] == out, out=taken)
        remaining -= taken  # windows whose gradient this tap took get nothing more
    grad[:, :, 1::2, 1::2] = remaining
    return grad


# ----------------------------------------------------------------------------------------------- workloads


class MLPStep:
    """W1: MLP 784-512-256-10, one SGD step (lr 0.01, momentum 0.9) on the mean cross-entropy.

    h1 = relu(x @ W0.T + b0), h2 = relu(h1 @ W2.T + b2), logits = h2 @ W4.T + b4.
    Backward: dlogits = (softmax - onehot) / N; for each linear layer dW = g.T @ input, db = sum of g over the
    batch, dinput = g @ W; through ReLU the gradient is kept where the output is positive.
    """

    def __init__(self, params: dict[str, numpy.ndarray], xp=numpy, lr: float = 0.01, momentum: float = 0.9):
        self.xp, self.lr, self.momentum = xp, lr, momentum
        self.params = _copy_params(params, xp)
        self.bufs: dict = {}

    def step(self, x, y) -> float:
        xp, p = self.xp, self.params
        h1 = x @ p["0.weight"].T
        h1 += p["0.bias"]
        xp.maximum(h1, 0, out=h1)
        h2 = h1 @ p["2.weight"].T
        h2 += p["2.bias"]
        xp.maximum(h2, 0, out=h2)
        logits = h2 @ p["4.weight"].T
        logits += p["4.bias"]
        loss, g = cross_entropy(logits, y, xp)

        grads: dict = {}
        g = _linear_backward(g, h2, p["4.weight"], "4", grads)
        g *= h2 > 0
        g = _linear_backward(g, h1, p["2.weight"], "2", grads)
        g *= h1 > 0
        _linear_backward(g, x, p["0.weight"], "0", grads, need_input=False)
        _sgd(p, grads, self.bufs, self.lr, self.momentum, xp)
        return float(loss)


class CNNStep:
    """W2: the small CNN, one SGD step (lr 0.01, momentum 0.9) on the mean cross-entropy, for N x 1 x 28 x 28.

    z1 = conv(x; W0, b0), p1 = maxpool2(relu(z1)), z2 = conv(p1; W3, b3), p2 = maxpool2(relu(z2)),
    logits = flatten(p2) @ W7.T + b7; each conv (3x3, padding 1) is out[n] = W2d @ im2col(input)[n] + b.
    Backward: the linear layer as in ``MLPStep``; max-pool sends each window's gradient to its first maximum,
    masked by ReLU; conv: dW = sum over n of g[n] @ col[n].T, db = sum of g, dinput = col2im(W2d.T @ g[n]).
    """

    def __init__(self, params: dict[str, numpy.ndarray], xp=numpy, lr: float = 0.01, momentum: float = 0.9):
        self.xp, self.lr, self.momentum = xp, lr, momentum
        self.params = _copy_params(params, xp)
        self.bufs: dict = {}

    def step(self, x, y) -> float:
        xp, p = self.xp, self.params
        n = x.shape[0]
        r1, col1 = _conv_forward(x, p["0.weight"], p["0.bias"], 1, xp)
        p1 = _relu_pool_forward(r1, xp)
        r2, col2 = _conv_forward(p1, p["3.weight"], p["3.bias"], 1, xp)
        p2 = _relu_pool_forward(r2, xp)
        flat = p2.reshape(n, -1)
        logits = flat @ p["7.weight"].T
        logits += p["7.bias"]
        loss, g = cross_entropy(logits, y, xp)

        grads: dict = {}
        g = _linear_backward(g, flat, p["7.weight"], "7", grads).reshape(p2.shape)
        g = _relu_pool_backward(g, r2, p2, xp)
        g, grads["3.weight"], grads["3.bias"] = _conv_backward(g, col2, p["3.weight"], p1.shape, 1, xp)
        g = _relu_pool_backward(g, r1, p1, xp)
        _, grads["0.weight"], grads["0.bias"] = _conv_backward(g, col1, p["0.weight"], x.shape, 1, xp, False)
        _sgd(p, grads, self.bufs, self.lr, self.momentum, xp)
        return float(loss)


class RegressionFit:
    """W4: Linear(1, 10) - ReLU - Linear(10, 1), one full-batch step of plain SGD (lr 0.2) on the MSE.

    h = relu(x @ W0.T + b0), pred = h @ W2.T + b2, loss = mean((pred - y)^2).
    Backward: dpred = 2 (pred - y) / N, then the linear layers and the ReLU mask as in ``MLPStep``.
    """

    def __init__(self, params: dict[str, numpy.ndarray], xp=numpy, lr: float = 0.2):
        self.xp, self.lr = xp, lr
        self.params = _copy_params(params, xp)

    def step(self, x, y) -> float:
        xp, p = self.xp, self.params
        h = x @ p["0.weight"].T
        h += p["0.bias"]
        xp.maximum(h, 0, out=h)
        diff = h @ p["2.weight"].T
        diff += p["2.bias"]
        diff -= y
        loss = (diff * diff).mean()

        grads: dict = {}
        diff *= 2 / diff.size
        g = _linear_backward(diff, h, p["2.weight"], "2", grads)
        g *= h > 0
        _linear_backward(g, x, p["0.weight"], "0", grads, need_input=False)
        _sgd(p, grads, {}, self.lr, 0.0, xp)
        return float(loss)


class ConvBig:
    """W5: Conv2d(C, OC, 3, padding=1) forward and backward for the loss sum(out * g), g the upstream gradient.

    out[n] = W2d @ col[n] + b, col = im2col(x) as (N, C*9, H*W) and W2d = weight as (OC, C*9).
    grad_weight = sum over n of g[n] @ col[n].T, grad_bias = sum of g over (N, H, W),
    grad_input = col2im(W2d.T @ g[n]). ``step(x, g)`` stores the three; the weights are not updated.
    """

    def __init__(self, params: dict[str, numpy.ndarray], xp=numpy):
        self.xp = xp
        self.params = _copy_params(params, xp)
        self.out = self.grad_input = self.grad_weight = self.grad_bias = None

    def step(self, x, g) -> None:
        xp, p = self.xp, self.params
        self.out, col = _conv_forward(x, p["weight"], p["bias"], 1, xp)
        self.grad_input, self.grad_weight, self.grad_bias = _conv_backward(g, col, p["weight"], x.shape, 1, xp)


def tiny_ops(x, w, b, iterations: int = 500, xp=numpy):
    """W3: ``h = x*w; h = h + b; t = tanh(h); x = x + t`` repeated on 1-element arrays, then the gradients of
    sum(x_final) with respect to x0, w and b.

    Backward, from gx = 1 at the end, per iteration in reverse: gh = gx * (1 - t^2); gb += gh; gw += gh * x_in;
    gx = gx + gh * w (x_in reaches the output directly and through the product).
    """
    saved = []
    for _ in range(iterations):
        h = x * w
        h = h + b
        t = xp.tanh(h)
        saved.append((x, t))
        x = x + t
    gx = xp.ones_like(x)
    gw = xp.zeros_like(w)
    gb = xp.zeros_like(b)
    for x_in, t in reversed(saved):
        gh = gx * (1 - t * t)
        gb += gh
        gw += gh * x_in
        gx = gx + gh * w
    return gx, gw, gb
