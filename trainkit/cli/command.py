"""The ``trainkit`` command: ``train``, ``evaluate`` and ``check`` a run described by a YAML config.

Exit codes: 0 done, 1 the run failed (one line says why; ``--debug`` shows the traceback), 2 the config or the
command line is wrong, 3 the run diverged (a NaN or infinite loss; the last good checkpoint stays), 130 interrupted
by Ctrl-C (after saving a checkpoint).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

from .. import __version__
from ..autograd.explore import explore
from ..autograd.graph import graph
from ..callbacks import EarlyStopping, TerminateOnNaN
from ..data.files import classes_of
from ..distributed import launched_size, world
from ..registry import CALLBACKS, DATA_KINDS, LOSSES, OPTIMIZERS, SCHEDULERS
from ..serialization import FileFormatError, TorchFileError
from ..training.checkpoint import CheckpointError, load_weights
from . import config as cfg
from .config import ConfigError
from .dry_run import BatchCheckError, FirstStep, diagnose, one_batch
from .process import exit_code, keep_freed_memory, sigterm_as_interrupt
from .run import build, find_checkpoint, saved_beside, saved_classes, start_run
from .run_torch import run as run_torch_script

_EXAMPLES = {
    "train": """examples:
  trainkit train configs/regression.yaml
  trainkit train configs/regression.yaml --set trainer.epochs=50 --set optimizer.lr=1e-3
  trainkit train configs/regression.yaml --print-config > my.yaml   (every key, defaults included, paths absolute)
  trainkit train configs/regression.yaml --resume runs/regression""",
    "evaluate": """examples:
  trainkit evaluate configs/regression.yaml --checkpoint runs/regression/version_0/checkpoints/best.npz
  trainkit evaluate configs/regression.yaml --checkpoint runs/regression   (its latest version's last.npz)
  trainkit evaluate configs/regression.yaml --checkpoint weights.safetensors   (a state dict: .npz, .pt, .pth)
  trainkit evaluate configs/digits.yaml --checkpoint CKPT --split val   (train, val, test or all)""",
    "check": """examples:
  trainkit check configs/digits.yaml
  trainkit check configs/digits.yaml --set trainer.batch_size=64""",
    "graph": """examples:
  trainkit graph configs/regression.yaml                (text tree, and runs/<name>/graph.svg with Graphviz)
  trainkit graph configs/regression.yaml --format dot
  trainkit graph configs/regression.yaml --html graph.html   (an interactive page: open it in a browser)""",
}


def _names() -> str:
    """What a config may name, from the registries (docs/config.md has every key)."""
    lines = [
        f"  {kind}: {', '.join(registry)}"
        for kind, registry in (
            ("optimizer.name", OPTIMIZERS),
            ("scheduler.name", SCHEDULERS),
            ("loss", LOSSES),
            ("callbacks", CALLBACKS),
            ("data.kind", DATA_KINDS),
        )
    ]
    return "names a config can use:\n" + "\n".join(lines) + "\nevery key: docs/config.md, or --print-config"


def _command(commands, name: str, help: str, names: bool = False) -> argparse.ArgumentParser:  # noqa: A002
    """A subcommand that reads a config: its help, examples, CONFIG, --set and the hidden --debug."""
    epilog = _EXAMPLES[name] + ("\n\n" + _names() if names else "")
    command = commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("config", help="the run's YAML config (see docs/config.md)")
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (repeatable), e.g. --set trainer.epochs=5",
    )
    command.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback when the run fails"
    )
    return command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainkit",
        description="Train models described by a YAML config.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="run 'trainkit COMMAND --help' for a command's options and examples\n"
        "exit codes: 0 done, 1 the run failed, 2 the config or the command line is wrong, 3 the run diverged "
        "(a non-finite loss), 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"trainkit {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback when a run fails")
    commands = parser.add_subparsers(dest="command", metavar="{train,evaluate,check,graph,bench,run-torch}")
    train = _command(commands, "train", "train the model a config describes", names=True)
    train.add_argument(
        "--resume",
        metavar="RUN",
        help="continue a run: its version folder (runs/NAME/version_N), its name folder (the latest "
        "version) or a checkpoint file; the newer of last.npz and interrupted.npz is used",
    )
    train.add_argument(
        "--print-config",
        action="store_true",
        help="print the complete config (every key, defaults included, with its help) and exit; the files it reads "
        "are printed absolute, so it loads from any folder (a relative output_dir stays the working directory's)",
    )
    evaluate = _command(commands, "evaluate", "evaluate a checkpoint on the config's data")
    evaluate.add_argument(
        "--checkpoint",
        required=True,
        help="what --resume takes (a checkpoint file, a run folder runs/NAME/version_N or runs/NAME: its "
        "last.npz, or interrupted.npz when newer) or a weights file (a state dict in .npz, .pt/.pth or "
        ".safetensors)",
    )
    evaluate.add_argument(
        "--split",
        choices=("train", "val", "test", "all"),
        help="which samples to score (default: test when the config holds some out, else val, "
        "else all), split as training split them",
    )
    _command(commands, "check", "check a config: build everything it names, without training", names=True)
    graph = _command(commands, "graph", "draw the backward graph of the model's loss for one batch")
    graph.add_argument(
        "--format",
        default="svg",
        choices=("svg", "png", "dot"),
        help="the drawing written next to the printed tree (svg and png need Graphviz)",
    )
    graph.add_argument(
        "--html",
        metavar="PATH",
        help="write an interactive page of the graph instead of the drawing: one self-contained HTML "
        "file (parameters by module, saved tensors, gradient norms of one backward pass)",
    )
    bench = commands.add_parser(
        "bench",
        add_help=False,  # --help goes on to the suite's own
        help="run the benchmark suite of a source checkout: python -m benchmarks [ARGS]",
    )
    del bench  # its arguments are the suite's: main passes on whatever follows "bench"
    run_torch = commands.add_parser(
        "run-torch",
        help="run a PyTorch program unmodified: import torch gives trainkit",
        description="Run SCRIPT as python SCRIPT ARGS would, with import torch (and every torch.X.Y) giving\n"
        "trainkit's module of the same path. Exit code and traceback are python's.",
        epilog="examples:\n  trainkit run-torch train.py --epochs 2\n"
        "  trainkit run-torch --nproc 2 train.py\n"
        "  python -m trainkit.torch_run train.py --epochs 2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run_torch.add_argument(
        "--nproc",
        "--nproc_per_node",
        "--nproc-per-node",
        dest="nproc",
        type=int,
        metavar="N",
        help="start N ranks through mpiexec, each with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, ...)",
    )
    run_torch.add_argument("script", help="the PyTorch program (a .py file)")
    run_torch.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments (its sys.argv[1:])")
    return parser


def _bench(args) -> int:
    # The suite is not part of the installed package: only a source checkout has it, so it runs as its own program
    # from the checkout this package was installed from (pip install -e .).
    root = Path(__file__).resolve().parents[2]
    if not (root / "benchmarks" / "suite.py").is_file():
        raise RuntimeError(
            f"the benchmark suite lives in benchmarks/ of a source checkout, and {root} has none: "
            "clone the repository and install it with pip install -e ."
        )
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    return subprocess.call([sys.executable, "-m", "benchmarks", *args.args], env={**os.environ, "PYTHONPATH": path})


def _run_torch(args) -> int:
    return run_torch_script([args.script, *args.args], nproc=args.nproc)


def _train(args) -> int:
    config = cfg.load(args.config, args.set)
    if args.print_config:
        print(cfg.dump(config), end="")
        return 0
    keep_freed_memory()  # this process is ours: keep freed blocks for reuse (about 2x faster steps)
    started = start_run(config, args.resume)  # a new runs/NAME/version_N, or the folder of the run resumed
    run = started.run
    lead = run.trainer.rank == 0  # in data-parallel runs, only rank 0 writes and prints
    watch = FirstStep()
    run.trainer.callbacks.append(watch)
    try:
        history = run.trainer.fit(run.dataset, resume_from=started.resume, **run.fit_args)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM (a scheduler, a container, kill)
        if lead:
            print(f"\n{started.interrupted()}", file=sys.stderr)  # saves checkpoints/interrupted.npz
        return exit_code(interrupt)
    except Exception as err:
        started.abandon()  # a run that failed before its first epoch ended leaves no folder behind
        # Before its first step ended: a model and data that do not fit, named as trainkit check names them.
        found = None if watch.ended else diagnose(run.trainer, run.dataset, run.fit_args["batch_size"], err)
        if found is not None:
            raise BatchCheckError(f"{args.config}: {found}") from err
        raise
    finally:
        started.release()
    if not lead:
        return 0
    diverged = run.first(TerminateOnNaN, "stopped_step")
    if diverged is not None or not all(math.isfinite(v) for v in history.history.get("loss", [])[-1:]):
        where = f" at step {diverged.stopped_step} (epoch {diverged.stopped_epoch + 1})" if diverged else ""
        last = run.folder.last
        kept = f"the last good checkpoint is {last}" if last.is_file() else "no epoch ended well, so no checkpoint"
        print(
            f"trainkit: diverged: the loss became non-finite{where}; {kept} (try a smaller optimizer.lr)",
            file=sys.stderr,
        )
        return 3
    final = {k: v[-1] for k, v in history.history.items() if v and not k.startswith("grad")}
    shown = ", ".join(f"{k} {v:.6g}" for k, v in final.items() if isinstance(v, float))
    restored = run.first(EarlyStopping, "restored_epoch")
    if restored is not None:  # the figures above are the last epoch's; the model now holds another epoch's weights
        shown += f" (last epoch); weights of epoch {restored.restored_epoch + 1} restored"
    print(f"done: {len(history.history.get('loss', []))} epochs, {shown}; run folder {run.run_dir}")
    return 0


def _evaluate(args) -> int:
    config = cfg.load(args.config, args.set)
    config.trainer.verbose = False
    where = Path(args.checkpoint)
    if not where.exists():
        raise CheckpointError(f"--checkpoint {where}: no such run folder, checkpoint or weights file")
    checkpoint, _ = find_checkpoint(where, "--checkpoint")  # a folder: the checkpoint --resume would take
    folder = saved_beside(checkpoint)  # the run's own files: what its model's ids and indices stand for
    if config.data.kind == "text" and config.data.vocabulary is None and folder.vocabulary.is_file():
        config.data.vocabulary = str(folder.vocabulary)
    classes = saved_classes(config, folder)
    run = build(config, classes=classes)
    split = args.split or run.default_split()
    try:
        data = run.split(split)
    except ValueError as err:
        raise ConfigError(f"{args.config}: --split {split}: {err}") from None
    load_weights(run.trainer.model, checkpoint, run.trainer.device)
    if classes is None and classes_of(run.dataset) is not None:
        warnings.warn(
            f"{checkpoint}: no {folder.CLASSES} beside it, so the class names of {config.data.path} are numbered in "
            "their sorted order; that is the training run's order only if its data held the same names",
            stacklevel=1,
        )
    results = run.trainer.evaluate(data, batch_size=run.fit_args["batch_size"])
    if run.trainer.rank:
        return 0
    if where.is_dir():
        print(f"checkpoint {checkpoint}")
    figures = ", ".join(f"{k} {v:.6g}" for k, v in results.items())
    print(f"{split} ({len(data)} samples): {figures}")
    return 0


def _check(args) -> int:
    config = cfg.load(args.config, args.set)
    config.trainer.verbose = False
    run = build(config)
    params = sum(p.numel() for p in run.trainer.model.parameters())
    try:
        batch = one_batch(run.trainer, run.dataset, run.fit_args["batch_size"])
    except BatchCheckError as err:  # the config loads, yet its parts do not fit together
        raise ConfigError(f"{args.config}: {err}") from None
    if run.trainer.rank:
        return 0
    print(
        f"{args.config}: OK ({type(run.trainer.model).__name__}, {params:,} parameters, {len(run.dataset)} samples; "
        f"{batch})"
    )
    return 0


def _graph(args) -> int:
    config = cfg.load(args.config, args.set)
    config.trainer.verbose = False
    run = build(config)
    trainer = run.trainer
    batch = next(iter(trainer.make_loader(run.dataset, batch_size=run.fit_args["batch_size"])))
    x, y = trainer.unpack_batch(batch)
    trace = explore.record(trainer.model)
    with trace:  # which module's forward made each node: the page's boxes, parameter-free modules included
        loss = trainer.loss_fn(trainer.model(x), y)
    g = graph(loss, params=dict(trainer.model.named_parameters()))
    if trainer.rank:
        return 0
    print(g.text())
    if args.html:
        with trace:  # one backward, so that the page shows gradient norms and the engine's order
            loss.backward()
        explore(loss, trainer.model, path=args.html, trace=trace, title=f"{args.config}: backward graph")
        print(f"wrote {args.html}")
        return 0
    run.run_dir.mkdir(parents=True, exist_ok=True)
    target = run.run_dir / f"graph.{args.format}"
    try:
        written = g.render(target)
    except RuntimeError as err:  # no Graphviz: the DOT file is still there
        print(f"{err}", file=sys.stderr)
        return 0
    print(f"wrote {written}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``trainkit`` command.

    >>> main(["--version"])  # doctest: +SKIP
    trainkit 0.1.0
    """
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    warnings.formatwarning = _format_warning
    if args.command == "bench":
        args.args = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command is None:
        parser.print_help()
        return 2
    if launched_size() > 1:
        world().show_traceback = args.debug
    handler = {
        "train": _train,
        "evaluate": _evaluate,
        "check": _check,
        "graph": _graph,
        "bench": _bench,
        "run-torch": _run_torch,
    }[args.command]
    try:
        with sigterm_as_interrupt():
            return handler(args)
    except ConfigError as err:
        if launched_size() > 1:  # one rank may fail alone (a file it cannot load): the others must not wait for it
            world().abort(f"config error: {err}", 2)
        print(f"trainkit: config error: {err}", file=sys.stderr)
        return 2
    except (CheckpointError, FileFormatError, TorchFileError) as err:  # a file the user named that cannot be used
        if launched_size() > 1:
            world().abort(f"error: {err}", 2)
        print(f"trainkit: error: {err}", file=sys.stderr)
        return 2
    except BatchCheckError as err:  # a first step that failed, named as trainkit check names it
        if launched_size() > 1:
            world().abort(f"error: {err}", detail=traceback.format_exc() if args.debug else "")
        if args.debug:
            raise
        print(f"trainkit: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        if launched_size() > 1:
            world().abort("interrupted", exit_code(interrupt))
        print("\ninterrupted", file=sys.stderr)
        return exit_code(interrupt)
    except Exception as err:  # noqa: BLE001  (one line for users; --debug shows everything)
        if launched_size() > 1:  # the other ranks may be waiting for this one in a collective
            world().abort(f"error: {type(err).__name__}: {err}", detail=traceback.format_exc() if args.debug else "")
        if args.debug:
            raise
        print(f"trainkit: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as the command's own lines: under ``trainkit train`` the user's code is the config, not a file."""
    return f"trainkit: {category.__name__}: {message}\n"


def _rank() -> int:
    return world().rank if launched_size() > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
