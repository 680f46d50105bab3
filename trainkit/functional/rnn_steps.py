"""The time-step schedule of one recurrent layer and direction, and its composite (differentiable) form.

A layer runs over ``total`` rows of input: T steps, step t holding ``b_t`` rows (all N for a padded batch; the
``batch_sizes`` of a packed one, non-increasing). Hidden states live in one array ``E`` of ``total + N`` rows: the
initial state's N rows and the ``total`` output rows. Forward in time, h0 comes first (rows 0..N) and the outputs
follow; in reverse the outputs come first and h0 last. Then, for a padded batch, the previous state of every row
is the row N before it (forward) or after it (reverse), so the states read by all steps form one slice of ``E``:
the recurrent weight gradient is one product over all steps.

Each step reads its previous state as one or two *segments* of ``E``: in reverse over a packed batch the batch grows
from step to step, and the rows that start at that step read h0.
"""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..autograd.api import grad as autograd_grad
from ..autograd.function import Op
from ..autograd.ops.join import cat
from ..autograd.saved import SavedOutput
from ..autograd.tensor import Tensor

__all__: list[str] = []


class Schedule:
    """Where each step of a layer reads and writes its rows.

    ``steps``: in processing order, ``(row, b, segments)``: the step's rows are ``row..row+b`` of the flat input and
    output, and ``segments`` lists ``(lo, hi, e)``: rows lo..hi of its previous state are ``E[e:e + hi - lo]``.
    ``h0_at`` and ``out_at``: where h0 and the output rows start in ``E``. ``last``: the row of ``E`` holding each
    sequence's final state (h_n). ``prev``: the rows of ``E`` read as previous state by each flat row, as a slice
    when they are contiguous, else an index array.

    >>> s = Schedule([2, 2], reverse=False)
    >>> s.total, s.h0_at, s.out_at, s.prev
    (4, 0, 2, slice(0, 4, None))
    """

    def __init__(self, batch_sizes, reverse: bool):
        sizes = [int(b) for b in batch_sizes]
        self.sizes, self.reverse = sizes, reverse
        self.n = n = sizes[0] if sizes else 0
        self.total = total = sum(sizes)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if sizes else np.zeros(0, np.int64)
        self.offsets = offsets
        self.h0_at, self.out_at = (total, 0) if reverse else (0, n)
        out_at, h0_at = self.out_at, self.h0_at
        steps = []
        prev = np.empty(total, dtype=np.int64)
        order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
        before = None  # the step processed just before
        for t in order:
            b, row = sizes[t], int(offsets[t])
            if before is None:
                segments = [(0, b, h0_at)]
            else:
                b_prev, row_prev = sizes[before], int(offsets[before])
                shared = min(b, b_prev)
                segments = [(0, shared, out_at + row_prev)]
                if b > shared:  # rows that begin at this step (reverse over a packed batch) start from h0
                    segments.append((shared, b, h0_at + shared))
            for lo, hi, e in segments:
                prev[row + lo : row + hi] = np.arange(e, e + hi - lo)
            steps.append((row, b, tuple(segments)))
            before = t
        self.steps = steps
        if total and np.array_equal(prev, np.arange(prev[0], prev[0] + total)):
            self.prev = slice(int(prev[0]), int(prev[0]) + total)
        else:
            self.prev = prev
        last = np.empty(n, dtype=np.int64)
        if reverse:
            last[:] = out_at + np.arange(n)
        else:
            for t in range(len(sizes)):  # sequence j ends at the last step with more than j rows
                b_next = sizes[t + 1] if t + 1 < len(sizes) else 0
                last[b_next : sizes[t]] = out_at + int(offsets[t]) + np.arange(b_next, sizes[t])
        self.last = last
        self._on_device: dict = {}

    def indices(self, xp) -> tuple:
        """``(last, prev)`` as indices for arrays of the module ``xp`` (CuPy gets its own copies, made once)."""
        if xp is np:
            return self.last, self.prev
        key = id(xp)
        if key not in self._on_device:
            prev = self.prev if isinstance(self.prev, slice) else xp.asarray(self.prev)
            self._on_device[key] = (xp.asarray(self.last), prev)
        return self._on_device[key]


def read_prev(E, segments, b: int, tmp):
    """The previous state of a step's ``b`` rows: a view of ``E`` when one segment covers them, else gathered into
    ``tmp[:b]``.

    >>> E = np.arange(5.0)[:, None]
    >>> read_prev(E, [(0, 1, 2), (1, 3, 3)], 3, np.empty((3, 1))).ravel().tolist()
    [2.0, 3.0, 4.0]
    """
    if len(segments) == 1:
        e = segments[0][2]
        return E[e : e + b]
    out = tmp[:b]
    for lo, hi, e in segments:
        out[lo:hi] = E[e : e + hi - lo]
    return out


def add_prev(dE, segments, grad) -> None:
    """Add a step's gradient for its previous state into the rows of ``dE`` that state came from.

    >>> dE = np.zeros((4, 1))
    >>> add_prev(dE, [(0, 2, 1)], np.ones((2, 1)))
    >>> dE.ravel().tolist()
    [0.0, 1.0, 1.0, 0.0]
    """
    for lo, hi, e in segments:
        dE[e : e + hi - lo] += grad[lo:hi]


# ------------------------------------------------------------------------------------------- composite form
def _cell(mode: str, x_row: Tensor, h: Tensor, c, w_hh: Tensor, b_hh, w_hr) -> tuple:
    """One step with ordinary ops, from the step's input projection ``x_row`` (x W_ih^T + b_ih)."""
    hh = h @ w_hh.t()
    if b_hh is not None:
        hh = hh + b_hh
    if mode == "LSTM":
        size = hh.shape[1] // 4
        a = x_row + hh
        i, f = a[:, :size].sigmoid(), a[:, size : 2 * size].sigmoid()
        g, o = a[:, 2 * size : 3 * size].tanh(), a[:, 3 * size :].sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        if w_hr is not None:
            h = h @ w_hr.t()
        return h, c
    if mode == "GRU":
        size = hh.shape[1] // 3
        r = (x_row[:, :size] + hh[:, :size]).sigmoid()
        z = (x_row[:, size : 2 * size] + hh[:, size : 2 * size]).sigmoid()
        n = (x_row[:, 2 * size :] + r * hh[:, 2 * size :]).tanh()
        return n + z * (h - n), None
    a = x_row + hh
    return (a.tanh() if mode == "RNN_TANH" else a.relu()), None


def composite_layer(mode: str, sched: Schedule, x: Tensor, h0: Tensor, c0, w_ih, w_hh, b_ih, b_hh, w_hr) -> tuple:
    """The layer of the fused op, written with differentiable ops: (output rows, h_n[, c_n]) as Tensors.

    Slower than the fused op; it is what a ``create_graph`` backward differentiates, so that second derivatives
    come out right."""
    xw = x @ w_ih.t()
    if b_ih is not None:
        xw = xw + b_ih
    blocks_h: dict = {sched.h0_at: h0}
    blocks_c: dict = {sched.h0_at: c0}
    outs: dict = {}

    def rows(blocks, e, count):
        if sched.h0_at <= e < sched.h0_at + sched.n:
            return blocks[sched.h0_at][e - sched.h0_at : e - sched.h0_at + count]
        return blocks[e][:count]

    for row, b, segments in sched.steps:
        parts_h = [rows(blocks_h, e, hi - lo) for lo, hi, e in segments]
        h = parts_h[0] if len(parts_h) == 1 else cat(parts_h, 0)
        c = None
        if mode == "LSTM":
            parts_c = [rows(blocks_c, e, hi - lo) for lo, hi, e in segments]
            c = parts_c[0] if len(parts_c) == 1 else cat(parts_c, 0)
        h, c = _cell(mode, xw[row : row + b], h, c, w_hh, b_hh, w_hr)
        blocks_h[sched.out_at + row] = h
        blocks_c[sched.out_at + row] = c
        outs[row] = h
    output = cat([outs[r] for r in sorted(outs)], 0)
    order = [output, h0] if sched.reverse else [h0, output]
    h_n = cat(order, 0)[sched.last]
    if mode != "LSTM":
        return output, h_n
    c_all = cat([blocks_c[sched.out_at + r] for r in sorted(outs)], 0)
    c_n = cat([c_all, c0] if sched.reverse else [c0, c_all], 0)[sched.last]
    return output, h_n, c_n


def composite_backward(node, mode: str, inputs: tuple, grads: tuple) -> tuple:
    """The gradients of a fused layer's inputs as a differentiable graph (``create_graph=True``): the layer is
    recomputed with ordinary ops from its saved inputs and differentiated by the engine itself.

    >>> import trainkit
    >>> gru = trainkit.nn.GRU(1, 1).double()
    >>> out, _ = gru(trainkit.ones(2, 1, 1, dtype=trainkit.float64))
    >>> (g,) = trainkit.autograd.grad(out.sum(), gru.weight_hh_l0, create_graph=True)
    >>> g.grad_fn is not None
    True
    """
    wanted = [i for i, (fn, _) in enumerate(node.next_functions) if fn is not None and isinstance(inputs[i], Tensor)]
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = inputs
    x2 = x.reshape(-1, x.shape[-1])
    with grad_mode.enable_grad():
        outs = composite_layer(mode, node.sched, x2, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    outs = (outs[0].reshape(*x.shape[:-1], outs[0].shape[-1]),) + tuple(outs[1:])
    found = autograd_grad(
        outs, [inputs[i] for i in wanted], grad_outputs=list(grads), create_graph=True, allow_unused=True
    )
    result = [None] * len(inputs)
    for i, g in zip(wanted, found):
        result[i] = g
    return tuple(result)


# ------------------------------------------------------------------------------------------------ the fused op
_NO_COUNTER = [0]  # version counter of an intermediate array: nothing outside the node can change it


class FusedLayer(Op):
    """Base of the fused layer ops: inputs ``(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)`` (None where a layer has no
    such input), keyword ``sched`` (a ``Schedule``); outputs ``(output, h_n)`` or ``(output, h_n, c_n)``.

    ``forward`` leaves the arrays its backward needs in ``self.keep`` (name -> array); ``run_layer`` moves them into
    the node's saved entries, where ``node.saved_tensors``, the graph printer and the explorer list them with their
    sizes, and where the engine frees them after backward."""

    save_inputs = (0, 1, 2, 3, 4, 5, 6, 7)
    multi_output = fresh_outputs = True
    mode = ""
    keep_names: tuple[str, ...] = ()

    def backward(self, *grads):
        saved = self.saved_tensors
        inputs = saved[:8]
        if isinstance(grads[0], Tensor):
            return composite_backward(self, self.mode, inputs, grads)
        kept = dict(zip(self.keep_names, saved[8:]))
        return self.backward_arrays(inputs, kept, *grads)

    def backward_arrays(self, inputs, kept, *grads):
        raise NotImplementedError

    def wants(self, i: int) -> bool:
        return self.next_functions[i][0] is not None


def run_layer(op: type, x: Tensor, h0: Tensor, c0, w_ih, w_hh, b_ih, b_hh, w_hr, sched: Schedule) -> tuple:
    """Apply the fused op ``op`` and attach its intermediate arrays to its node.

    >>> import trainkit
    >>> from trainkit.functional.rnn import RnnTanhLayer
    >>> w = trainkit.ones(2, 2, requires_grad=True)
    >>> out, h_n = run_layer(RnnTanhLayer, trainkit.ones(3, 1, 2), trainkit.zeros(1, 2), None, w, w, None, None, None,
    ...                      Schedule([1, 1, 1], reverse=False))
    >>> out.grad_fn.name(), [tuple(a.shape) for a in out.grad_fn.saved_tensors[8:]]
    ('RnnTanhLayerBackward0', [(4, 2)])
    """
    outs = op.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, sched=sched)
    node = outs[0]._grad_fn
    if node is not None:
        keep = node.keep
        node.keep = None
        node.keep_names = tuple(keep)
        node.saved_labels = {len(node._saved) + k: name for k, name in enumerate(keep)}  # for the explorer
        counter = outs[0]._version_counter
        # the output rows are part of the kept state array: checked against in-place changes of the output
        node._saved.extend(
            (SavedOutput(0), a, counter[0], counter) if name == "states" else (a, a, 0, _NO_COUNTER)
            for name, a in keep.items()
        )
    return outs
