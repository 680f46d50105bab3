"""``summary``: a Keras-style table of a model's layers, output shapes and parameter counts.

The table comes from one forward pass on zeros. A model that takes token ids (an ``Embedding`` first) needs
integer zeros: when an input reaches a module that looks indices up (one with ``num_embeddings``, as ``Embedding``
and ``EmbeddingBag`` have) as floats, the pass is run again with that input as ``int64``. Anything else takes
``dtypes=[...]`` (one per input, as torchinfo's ``summary``), ``dtype=`` (all inputs) or the inputs themselves
(``input_data=``); a forward that still fails says which of these to pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..autograd import grad_mode
from ..autograd.backend import int64
from ..autograd.creation import zeros
from ..autograd.tensor import Tensor

if TYPE_CHECKING:  # module.py imports this module for Module.summary
    from .module import Module

# words of the errors an op raises when it wanted integer indices and got floats
_INDEX_WORDS = ("indices", "index", "integer", "long", "int64", "scalar type")


class _WantsIndices(Exception):  # noqa: N818 - a signal between a hook and summary, never seen by users
    """An input of float zeros reached a module that looks indices up."""

    def __init__(self, position: int | None, module: str):
        super().__init__(module)
        self.position, self.module = position, module


def _shape_of(output) -> str:
    if isinstance(output, Tensor):
        return str(list(output.shape))
    if isinstance(output, (tuple, list)):
        return ", ".join(_shape_of(o) for o in output)
    return type(output).__name__


def _dtype_name(dtype) -> str:
    return str(dtype).rpartition(".")[2]


def _describe(inputs: list) -> str:
    return ", ".join(
        f"{_dtype_name(t.dtype)} {list(t.shape)}" if isinstance(t, Tensor) else type(t).__name__ for t in inputs
    )


def _shapes(input_shape, input_size, batch_size: int) -> list[tuple]:
    """The full shape of each input: ``input_shape`` without the batch dimension (Keras), ``input_size`` with it
    (torchinfo); a list of shapes for a model of several inputs."""
    if (input_shape is None) == (input_size is None):
        raise TypeError(
            "summary() takes the input's shape once: input_shape without the batch dimension, summary(model, (3, 28, "
            "28)), or input_size with it, summary(model, input_size=(16, 3, 28, 28))"
            + ("" if input_shape is None else f"; got input_shape={input_shape!r} and input_size={input_size!r}")
        )
    given = input_shape if input_shape is not None else input_size
    many = bool(given) and isinstance(given[0], (tuple, list))
    shapes = [tuple(s) for s in given] if many else [tuple(given)]
    return [(batch_size, *s) for s in shapes] if input_shape is not None else shapes


def _dtypes(dtype, dtypes, count: int) -> list | None:
    """One dtype per input, or None where summary is to find them (float, or int64 for indices)."""
    if dtype is not None and dtypes is not None:
        raise TypeError("summary() takes dtype= (every input) or dtypes= (one per input), not both")
    if dtypes is None:
        return None if dtype is None else [dtype] * count
    if not isinstance(dtypes, (list, tuple)):
        return [dtypes] * count  # a single dtype given as dtypes=
    if len(dtypes) != count:
        raise ValueError(f"summary(): dtypes has {len(dtypes)} entries for {count} input(s); give one per input")
    return list(dtypes)


def _failure(model, inputs: list, err: Exception, shaped: bool) -> Exception:
    """``err`` with what summary ran the model on, and what to pass instead, in one line."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    message = f"summary({type(model).__name__}): its forward failed on zeros of {_describe(inputs)}: {text}"
    floats = [k for k, t in enumerate(inputs) if isinstance(t, Tensor) and t.is_floating_point()]
    if floats and any(w in text.lower() for w in _INDEX_WORDS):
        wanted = "dtypes=[trainkit.long]" if len(inputs) == 1 else "dtypes=[...] with trainkit.long for each of them"
        message += (
            f". A model that takes token ids or other indices needs integer inputs: pass {wanted} (one dtype per "
            "input, as torchinfo), or input_data= with tensors of your own"
        )
    elif shaped:
        message += ". Check the input's shape (input_shape leaves out the batch dimension) and its dtype (dtypes=)"
    try:
        return type(err)(message)
    except Exception:  # an exception class that wants other arguments
        return RuntimeError(message)


def _run(model, inputs: list, leaves: set, infer: bool) -> list:
    """One forward pass under hooks: the row of each leaf layer; with ``infer``, a float input that reaches a
    module that looks indices up stops the pass (``_WantsIndices``)."""
    rows: list = []
    handles = []
    root_name = type(model).__name__
    for name, module in model.named_modules():
        if infer and hasattr(module, "num_embeddings"):

            def check(m, args, name=name or root_name):
                for a in args:
                    if isinstance(a, Tensor) and a.is_floating_point():
                        found = [k for k, t in enumerate(inputs) if t is a]
                        position = found[0] if found else (0 if len(inputs) == 1 else None)
                        raise _WantsIndices(position, f"{name} ({type(m).__name__})")

            handles.append(module.register_forward_pre_hook(check))
        if id(module) in leaves:

            def record(m, args, output, name=name or root_name):
                own = sum(p.numel() for p in m.parameters(recurse=False))
                rows.append((f"{name} ({type(m).__name__})", _shape_of(output), own))

            handles.append(module.register_forward_hook(record))
    try:
        with grad_mode.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return rows


def summary(
    model: Module,
    input_shape=None,
    *,
    batch_size: int = 1,
    dtype=None,
    dtypes=None,
    device=None,
    input_size=None,
    input_data: Any = None,
    print_fn=print,
) -> str:
    """Run one forward pass on zeros of shape ``(batch_size, *input_shape)`` and tabulate every leaf layer.

    ``input_shape`` leaves the batch out (Keras); ``input_size`` is the whole shape, batch included (torchinfo); a
    list of shapes feeds a model of several inputs. The zeros are float32, except an input that reaches a module
    that looks indices up (``Embedding``), which becomes int64. ``dtypes=[trainkit.long, ...]`` (one per input, as
    torchinfo) or ``dtype=`` (every input) choose them yourself; ``input_data`` (a tensor or a list of them) runs
    the model on your own inputs instead. The totals count each shared parameter once and split trainable
    (``requires_grad``) from frozen ones. Returns the table and hands it to ``print_fn`` (None to stay quiet).

    >>> import trainkit
    >>> from trainkit import nn
    >>> net = nn.Sequential(nn.Linear(1, 10), nn.ReLU(), nn.Linear(10, 1))
    >>> table = summary(net, (1,), print_fn=None)
    >>> print(table.splitlines()[-4])
    Total params: 31
    >>> words = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 2))
    >>> print(summary(words, (12,), print_fn=None).splitlines()[-1])
    Input: int64 [1, 12]
    >>> print(summary(words, input_size=(4, 12), dtypes=[trainkit.long], print_fn=None).splitlines()[-1])
    Input: int64 [4, 12]
    """
    if input_data is not None:
        if input_shape is not None or input_size is not None:
            raise TypeError("summary() takes input_data= or a shape (input_shape / input_size), not both")
        inputs = list(input_data) if isinstance(input_data, (list, tuple)) else [input_data]
        chosen = None
    else:
        shapes = _shapes(input_shape, input_size, batch_size)
        chosen = _dtypes(dtype, dtypes, len(shapes))
        kinds = list(chosen) if chosen is not None else [None] * len(shapes)
        inputs = [zeros(s, dtype=d, device=device) for s, d in zip(shapes, kinds)]
    leaves = {id(m) for m in model.modules() if not any(True for _ in m.children())}
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        while True:
            try:
                rows = _run(model, inputs, leaves, infer=input_data is None and chosen is None)
                break
            except _WantsIndices as wants:
                if wants.position is None or not inputs[wants.position].is_floating_point():
                    raise TypeError(
                        f"summary({type(model).__name__}): {wants.module} looks up indices, but summary cannot tell "
                        f"which of the inputs ({_describe(inputs)}) reaches it; pass dtypes=[...] with trainkit.long "
                        "for that input (one dtype per input, as torchinfo)"
                    ) from None
                kinds[wants.position] = int64
                inputs[wants.position] = zeros(shapes[wants.position], dtype=int64, device=device)
            except Exception as err:
                raise _failure(model, inputs, err, input_data is None) from err
    finally:
        for m, mode in modes:
            object.__setattr__(m, "training", mode)

    params = list(model.parameters())
    trainable = sum(p.numel() for p in params if p.requires_grad)
    frozen = sum(p.numel() for p in params if not p.requires_grad)
    headers = ("Layer (type)", "Output Shape", "Param #")
    widths = [max(len(headers[i]), *(len(str(r[i])) for r in rows)) + 4 for i in range(3)] if rows else [16, 16, 10]
    line = "=" * sum(widths)

    def fmt(cells) -> str:
        return "".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    lines = [
        fmt(headers),
        line,
        *(fmt((n, s, f"{c:,}")) for n, s, c in rows),
        line,
        f"Total params: {trainable + frozen:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {frozen:,}",
        f"Input: {_describe(inputs)}",
    ]
    table = "\n".join(lines)
    if print_fn is not None:
        print_fn(table)
    return table
