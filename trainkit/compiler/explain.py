"""``explain``: a compiled object's plans in words: kernels, buffers and bytes, guards, and what ran eagerly and why.

>>> import trainkit
>>> f = trainkit.compile(lambda x: (x * 2).relu().sum())
>>> _ = f(trainkit.ones(3))
>>> print(report(f).splitlines()[0])
compiled <lambda>: 1 plan, 1 capture, 0 replays, 0 eager calls
"""

from __future__ import annotations

from .plan import BackwardStep, CallStep, FuncStep, OpStep


def _nbytes(shape, dtype) -> int:
    n = 1
    for s in shape:
        n *= s
    return n * dtype.itemsize


def _name(fn) -> str:
    inner = getattr(fn, "func", None)
    if inner is not None and getattr(fn, "args", None):  # a compiled module's call
        return type(fn.args[0]).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def report(compiled) -> str:
    """The text ``explain()`` prints for a ``CompiledFunction``."""
    counts = compiled.counts
    plans = [e for e in compiled.entries if e.plan is not None]
    lines = [
        f"compiled {_name(compiled.fn)}: {len(plans)} plan{'s' * (len(plans) != 1)}, "
        f"{counts['captures']} capture{'s' * (counts['captures'] != 1)}, {counts['replays']} replays, "
        f"{counts['eager']} eager calls"
    ]
    for n, entry in enumerate(compiled.entries, 1):
        shapes = ", ".join(
            f"{tuple(shape)} {dtype}" + (" requires_grad" if rg else "") for shape, dtype, _, rg in entry.key[1]
        )
        lines.append("")
        lines.append(f"[{n}] inputs: {shapes or 'no tensors'}; grad mode {'on' if entry.key[2] else 'off'}")
        if entry.plan is None:
            lines.append(f"    runs eagerly: {entry.reason}")
        else:
            lines.extend("    " + line for line in describe(entry.plan))
            lines.append(f"    replayed {entry.replays} times")
        lines.append("    guards:")
        lines.extend("      - " + g for g in entry.guards.describe())
    if compiled.fallbacks:
        lines.append("")
        lines.append("fallbacks and recaptures (newest last):")
        lines.extend("  - " + text for text in compiled.fallbacks)
    return "\n".join(lines)


def describe(plan) -> list[str]:
    """One plan: its forward kernels, backward passes, calls and buffers."""
    ops = [s for s in plan.steps if isinstance(s, OpStep)]
    total = sum(_nbytes(shape, dtype) for s in ops for shape, dtype in s.out_shapes)
    lines = [
        f"{len(ops)} forward kernels, {sum(1 for s in ops if s.backward)} with a backward; "
        f"{plan.n_slots} array slots, {total:,} bytes of op results per call"
    ]
    for step in plan.steps:
        if isinstance(step, OpStep):
            outs = ", ".join(f"{tuple(shape)} {dtype}" for shape, dtype in step.out_shapes)
            args = ", ".join(f"%{i}" if type(i) is int else repr(i) for i in step.inputs)
            keys = ", ".join([f"{k}=..." for k in step.params] + [f"{k}=%{s}" for k, s, _ in step.refs])
            mark = " [backward]" if step.backward else ""
            lines.append(
                f"  %{','.join(map(str, step.outs))} = {step.cls.__name__}({args}{', ' if keys else ''}{keys})"
                f" -> {outs}{mark}"
            )
        elif isinstance(step, BackwardStep):
            sched = step.schedule
            lines.append(
                f"  backward from %{step.root}: {len(sched.steps)} nodes in the engine's order, "
                f"{len(sched.exits)} leaf gradients accumulated into .grad"
            )
        elif isinstance(step, FuncStep):
            args = ", ".join(f"%{i}" if type(i) is int else repr(i) for i in step.inputs)
            lines.append(
                f"  %{step.out} = {getattr(step.fn, '__name__', step.fn)}({args}) -> {step.shape[0]} {step.shape[1]}"
            )
        elif isinstance(step, CallStep):
            lines.append(f"  {'' if step.out is None else f'%{step.out} = '}call {step.text}")
    for slot, _, key, path in plan.located:
        lines.append(
            f"  %{slot}: state read from under {key!r}{''.join(f'[{p!r}]' for p in path)}, found anew each call"
        )
    for _, key in plan.stores:
        lines.append(f"  stores its new state under {key!r} for the next call")
    if plan.boundary is not None:
        lines.append(
            f"  outputs carry CompiledFunctionBackward: {len(plan.boundary.steps)} backward kernels, "
            f"{len(plan.boundary.exits)} gradients handed to inputs and parameters"
        )
    return lines
