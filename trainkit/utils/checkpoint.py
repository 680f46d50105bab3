"""``torch.utils.checkpoint``: activation checkpointing. A checkpointed piece of a model runs forward without
recording its graph (so its intermediate activations are not kept) and runs again, recording, when backward reaches
it; the gradients are those of the plain run. Memory for compute: one more forward per checkpointed piece.

>>> import trainkit
>>> from trainkit.utils.checkpoint import checkpoint
>>> x = trainkit.tensor([1.0, 2.0], requires_grad=True)
>>> y = checkpoint(lambda t: (t * t).sin(), x, use_reentrant=False)
>>> y.sum().backward()
>>> x.grad  # d sin(x^2) / dx = 2x cos(x^2)
tensor([ 1.0806, -2.6146])
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from ..autograd.api import backward
from ..autograd.creation import zeros
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..autograd.random import generator_for, get_rng_state, set_rng_state
from ..autograd.tensor import Tensor
from ..autograd.user_warnings import warn_user

__all__ = ["CheckpointFunction", "checkpoint", "checkpoint_sequential", "noop_context_fn"]


def noop_context_fn() -> tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    """The default ``context_fn``: no context around the forward run or the recomputation.

    >>> [type(c).__name__ for c in noop_context_fn()]
    ['nullcontext', 'nullcontext']
    """
    return contextlib.nullcontext(), contextlib.nullcontext()


class CheckpointFunction(Function):
    """The node of a checkpointed call (``CheckpointFunctionBackward``): forward runs ``run_function`` under
    ``no_grad`` and keeps only its inputs; backward restores the random state of the forward run (so dropout draws
    the same masks), runs it again with grad enabled on detached copies of the inputs, backpropagates the output
    gradients through that graph (parameters inside get their ``.grad`` there) and returns the inputs' gradients.
    """

    @staticmethod
    def forward(ctx, run_function: Callable, preserve_rng_state: bool, context_fn: Callable, kwargs: dict, *args):
        ctx.run_function, ctx.kwargs = run_function, kwargs
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        # the GPUs the inputs are on draw from their own streams: their states are kept too, as torch keeps them
        gpus = {a.device for a in args if isinstance(a, Tensor) and a.device.type != "cpu"}
        ctx.gpu_states = {d: generator_for(d).get_state() for d in gpus} if preserve_rng_state else {}
        forward_context, ctx.recompute_context = context_fn()
        # tensors are saved (their version checked in backward); everything else is kept as it is
        ctx.layout = [isinstance(a, Tensor) for a in args]
        ctx.others = [None if is_tensor else a for a, is_tensor in zip(args, ctx.layout)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        with no_grad(), forward_context:
            return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        saved = iter(ctx.saved_tensors)
        inputs = []
        for is_tensor, other in zip(ctx.layout, ctx.others):
            if is_tensor:
                tensor = next(saved)
                inputs.append(tensor.detach().requires_grad_(tensor.requires_grad))
            else:
                inputs.append(other)
        outer_state = get_rng_state()
        outer_gpu_states = {d: generator_for(d).get_state() for d in ctx.gpu_states}
        if ctx.rng_state is not None:
            set_rng_state(ctx.rng_state)
        for d, state in ctx.gpu_states.items():
            generator_for(d).set_state(state)
        try:
            with enable_grad(), ctx.recompute_context:
                outputs = ctx.run_function(*inputs, **ctx.kwargs)
        finally:
            set_rng_state(outer_state)
            for d, state in outer_gpu_states.items():
                generator_for(d).set_state(state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [
            (out, grad)
            for out, grad in zip(outputs, grad_outputs)
            if isinstance(out, Tensor) and out.requires_grad and grad is not None
        ]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        backward([out for out, _ in pairs], [grad for _, grad in pairs])
        grads = tuple(x.grad if isinstance(x, Tensor) else None for x in inputs)
        return (None, None, None, None) + grads


def checkpoint(
    function: Callable,
    *args,
    use_reentrant: bool | None = None,
    context_fn: Callable = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs,
) -> Any:
    """``function(*args, **kwargs)``, checkpointed: run without keeping its activations, and run again in
    backward to get its gradients (equal to those of the plain call).

    ``use_reentrant`` should be passed, as torch asks (left out: a warning, and ``True``). With ``True`` only
    positional arguments are taken, and when no input requires grad the result does not either (a warning
    says the gradients will be None); with ``False`` keyword arguments are passed on, and parameters used inside
    get gradients even when no input requires grad. ``preserve_rng_state`` replays the forward run's random
    numbers (dropout masks) in the recomputation; ``context_fn`` returns two context managers, entered around the
    forward run and around the recomputation. ``determinism_check`` (``"default"`` or ``"none"``), ``debug`` and
    ``early_stop`` are accepted.

    >>> import trainkit
    >>> layer = trainkit.nn.Linear(3, 2)
    >>> out = checkpoint(layer, trainkit.ones(1, 3), use_reentrant=False)
    >>> out.sum().backward()
    >>> layer.weight.grad
    tensor([[1., 1., 1.],
            [1., 1., 1.]])
    """
    if use_reentrant is None:
        warn_user(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. use_reentrant=False "
            "is recommended, but if you need to preserve the current default behavior, you can pass "
            "use_reentrant=True. Refer to docs for more details on the differences between the two variants."
        )
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warn_user("None of the inputs have requires_grad=True. Gradients will be None")
        return CheckpointFunction.apply(function, preserve_rng_state, context_fn, {}, *args)
    if not is_grad_enabled():
        return function(*args, **kwargs)
    # a tensor that requires grad, so that the node is recorded and reached by backward even when no input
    # requires grad: the parameters inside get their gradients in the recomputation
    anchor = zeros((), requires_grad=True)
    return CheckpointFunction.apply(anchor_dropped(function), preserve_rng_state, context_fn, kwargs, anchor, *args)


def anchor_dropped(function: Callable) -> Callable:
    """``function`` called without the anchor tensor in front of its arguments."""

    def call(anchor, *args, **kwargs):
        return function(*args, **kwargs)

    return call


def checkpoint_sequential(
    functions: Sequence[Callable], segments: int, input: Tensor, use_reentrant: bool | None = None, **kwargs
) -> Tensor:  # noqa: A002
    """Runs ``functions`` (a ``Sequential`` or a list of modules or functions) one after the other on ``input``,
    split into ``segments`` checkpointed runs; the last segment runs normally, as in torch.

    >>> import trainkit
    >>> from trainkit import nn
    >>> model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    >>> out = checkpoint_sequential(model, 2, trainkit.ones(3, 2, requires_grad=True), use_reentrant=False)
    >>> out.shape
    trainkit.Size([3, 1])
    """
    if use_reentrant is None:
        warn_user(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed explicitly. "
            "use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can "
            "pass use_reentrant=True. Refer to docs for more details on the differences between the two variants."
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)

    def run_function(start: int, end: int) -> Callable:
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(  # noqa: A001
            run_function(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run_function(end + 1, len(functions) - 1)(input)
