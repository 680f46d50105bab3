"""Sampling cases, running them, the known-disagreement list and the report."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from .cases import configs
from .harness import KINDS, Case, Record, compare, seed_of

HERE = Path(__file__).resolve().parent
KNOWN = HERE / "known.txt"
CI_CALLS = 6000  # the sample the test runs (and known.txt lists the disagreements of)
CI_SEED = 0
MIN_PER_OP = 6


def ops() -> list[str]:
    return sorted({case.op for case in configs()})


def sample(calls: int = CI_CALLS, seed: int = CI_SEED, op: str | None = None) -> list[Case]:
    """About ``calls`` cases, spread over the ops in proportion to their configured calls (at least
    ``MIN_PER_OP`` each, or all of them). An op's share depends only on ``calls``, ``seed`` and the op, so
    one op's sample can be drawn alone. When ``calls`` exceeds the configured calls, the same arguments are
    drawn again with other values (ids ending ``|d1``, ``|d2``...)."""
    by_op: dict[str, list[Case]] = defaultdict(list)
    for case in configs():
        by_op[case.op].append(case)
    total = sum(len(v) for v in by_op.values())
    rounds = max(1, math.ceil(calls / total))
    chosen: list[Case] = []
    for name in sorted(by_op) if op is None else [op]:
        pool = by_op[name]
        universe = [redraw(c, r) for r in range(rounds) for c in pool]
        want = min(len(universe), max(MIN_PER_OP, round(calls * len(pool) / total)))
        rng = np.random.default_rng([seed, seed_of(name)])
        picks = sorted(rng.choice(len(universe), size=want, replace=False)) if want < len(universe) else range(want)
        chosen += [universe[i] for i in picks]
    return chosen


def redraw(case: Case, round_: int) -> Case:
    return case if round_ == 0 else dataclasses.replace(case, cid=f"{case.cid}|d{round_}")


def run(cases, lib=None, ref=None) -> list[Record]:
    if lib is None:
        import trainkit as lib
    if ref is None:
        import torch as ref
    return [compare(case, lib, ref) for case in cases]


# --- the known list -----------------------------------------------------------------------------------------


def read_known(path: Path = KNOWN) -> dict[str, str]:
    """``case id -> reason`` from known.txt: one ``<case id>  # <kind>: <detail>`` a line."""
    known = {}
    if not path.exists():
        return known
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cid, _, reason = line.partition("  # ")
        known[cid.rstrip()] = reason.strip()
    return known


def write_known(records: list[Record], path: Path = KNOWN) -> None:
    lines = [
        "# Disagreements with torch the differential test tolerates, one case id a line with the kind and detail.",
        "# Regenerate with: python -m tests.differential --update-known",
    ]
    lines += [f"{r.cid}  # {r.kind}: {r.detail}".replace("\n", " ") for r in records if not r.agrees]
    path.write_text("\n".join(lines) + "\n")


def check_against_known(records: list[Record], known: dict[str, str]) -> list[str]:
    """The problems with a run: new disagreements, and known entries that now agree."""
    problems = []
    for r in records:
        if not r.agrees and r.cid not in known:
            problems.append(f"new disagreement {r.cid}: {r.kind}: {r.detail}")
        elif r.agrees and r.cid in known:
            problems.append(f"now agrees, remove from known.txt: {r.cid}")
    return problems


# --- the report ---------------------------------------------------------------------------------------------


def figure(records: list[Record]) -> str:
    agree = sum(r.agrees for r in records)
    return f"{agree}/{len(records)} calls agree ({100 * agree / max(1, len(records)):.2f}%)"


def by_kind(records: list[Record]) -> list[tuple[str, int, int]]:
    """Per kind: the calls whose first disagreement is of this kind, and the calls with it at all."""
    first = Counter(r.kind for r in records if not r.agrees)
    anywhere = Counter(k for r in records for k in r.kinds)
    return [(k, first[k], anywhere[k]) for k in KINDS]


def by_op(records: list[Record]) -> list[tuple[str, int, int, str]]:
    """Per op: calls, agreeing calls, and its disagreements by kind; worst first."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[r.op].append(r)
    rows = []
    for op, rs in groups.items():
        kinds = Counter(r.kind for r in rs if not r.agrees)
        rows.append((op, len(rs), sum(r.agrees for r in rs), ", ".join(f"{k} {n}" for k, n in kinds.most_common())))
    return sorted(rows, key=lambda row: (row[2] / row[1], row[0]))


def categories(records: list[Record]) -> list[tuple[str, list[Record]]]:
    """Disagreements grouped by kind and a normalised detail (numbers and shapes dropped), largest first."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.agrees:
            continue
        detail = re.sub(r"\[[^\]]*\]|\([^)]*\)|(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?\b", "…", r.detail)
        detail = re.sub(r"result \S+|input \S+", "", detail)
        groups[f"{r.kind}: {detail.strip()[:110]}"].append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def text_summary(records: list[Record], top: int = 25) -> str:
    lines = [f"Agreement: {figure(records)}", "", "By kind (first disagreement of a call / calls with it):"]
    lines += [f"  {k:16s} {first:6d} {anywhere:6d}" for k, first, anywhere in by_kind(records)]
    lines += ["", f"Worst ops (of {len({r.op for r in records})}):"]
    for op, n, ok, kinds in by_op(records)[:top]:
        if ok == n:
            break
        lines.append(f"  {op:32s} {ok:4d}/{n:<4d} {kinds}")
    return "\n".join(lines)


def markdown(records: list[Record], calls: int, seed: int, baseline: str | None = None) -> str:
    ops_seen = {r.op for r in records}
    out = [
        "# trainkit against PyTorch: the differential test",
        "",
        "`tests/differential` calls each op of `docs/pytorch-surface.md` (sections `trainkit`, `Tensor` methods and "
        "`trainkit.nn.functional`) on trainkit and on torch 2.13 with the same seeded inputs and compares the "
        "results. This page is written by `python -m tests.differential --report docs/differential.md`.",
        "",
        f"**{figure(records)}** over {len(ops_seen)} ops (`--calls {calls} --seed {seed}`).",
        "",
    ]
    if baseline:
        out += [baseline, ""]
    out += [
        "## What is compared",
        "",
        "- Inputs: float32, float64, int64 and bool tensors, 0-d to 5-d, empty dims, broadcasting pairs, "
        "non-contiguous layouts (transposed, step-sliced, expanded), Python scalars and 0-d tensors as operands, "
        "edge values (0, -0.0, ±1, huge, tiny, ±inf, nan), and per family the argument forms of torch's signature: "
        "dim/keepdim/dtype, in-place variants and operators, indexing forms, reduction/ignore_index/weight of "
        "losses, conv/pool/norm/pad/interpolate options, including calls torch refuses. The values of a call "
        "are drawn from a NumPy generator seeded by its case id, so an id names the same call in every run.",
        "- Forward: whether each library raises (and then the exception class: RuntimeError, IndexError, TypeError, "
        "ValueError, NotImplementedError; messages are not compared), the structure of the result, each tensor's "
        "shape, dtype, values (NaN equals NaN; rtol/atol 1e-4/1e-5 in float32, 1e-7/1e-9 in float64, exact for "
        "integers and bools; random ops: shape and dtype only), `requires_grad` and the grad_fn name; "
        "plain results (sizes, Python scalars, lists) exactly.",
        "- Backward, when results require grad in both: one seeded random upstream gradient, then whether backward "
        "raises, and each input's `.grad` (None or not, shape, dtype, values).",
        "- A call's kind is its first disagreement in the order: " + ", ".join(KINDS) + ".",
        "- Skipped names of the surface (dtypes, devices, grad modes, random state, files, trainkit's own "
        "names) are listed with the reason in `tests/differential/surface.py`.",
        "",
        "## By kind",
        "",
        "| kind | calls (first disagreement) | calls (any) |",
        "|---|---:|---:|",
    ]
    out += [f"| {k} | {first} | {anywhere} |" for k, first, anywhere in by_kind(records)]
    out += [
        "",
        "## By op",
        "",
        "Ops with a disagreement, worst first; every other op agrees on all its calls.",
        "",
        "| op | agree | calls | disagreements by kind |",
        "|---|---:|---:|---|",
    ]
    rows = by_op(records)
    out += [f"| `{op}` | {ok} | {n} | {kinds} |" for op, n, ok, kinds in rows if ok < n]
    agreeing = sorted(op for op, n, ok, _ in rows if ok == n)
    out += ["", f"All calls agree ({len(agreeing)} ops): " + ", ".join(f"`{op}`" for op in agreeing) + "."]
    out += [
        "",
        "## Remaining disagreements by category",
        "",
        "Grouped by kind and detail (numbers elided), with up to three case ids each.",
        "",
    ]
    for title, rs in categories(records):
        examples = ", ".join(f"`{r.cid}`" for r in rs[:3])
        out.append(f"- **{len(rs)}** × {title.replace('|', '/')} — {examples}")
    return "\n".join(out) + "\n"
