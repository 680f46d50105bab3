"""``trainkit.utils.tensorboard.SummaryWriter``: TensorBoard event files with ``torch.utils.tensorboard``'s API.

The event files are written by tensorboardX (an optional extra: ``pip install 'trainkit[tensorboard]'``), the
well-kept writer PyTorch's own grew from; this class gives it PyTorch's signature and accepts trainkit tensors
wherever PyTorch takes tensors. View the files with ``tensorboard --logdir runs``.

>>> import tempfile, trainkit
>>> with SummaryWriter(tempfile.mkdtemp()) as writer:  # doctest: +SKIP
...     for step in range(3):
...         writer.add_scalar("loss", 1.0 / (step + 1), step)
...     writer.add_histogram("weights", trainkit.randn(100), 0)
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..autograd.tensor import Tensor

INSTALL_HINT = (
    "TensorBoard logging needs tensorboardX, an optional extra: pip install 'trainkit[tensorboard]' "
    "(or pip install tensorboardX)"
)


def _writer_class() -> type:
    try:
        return importlib.import_module("tensorboardX").SummaryWriter
    except ImportError:
        raise ImportError(INSTALL_HINT) from None


def _plain(value: Any) -> Any:
    """Tensors as NumPy arrays (one element as a number), what tensorboardX takes."""
    if isinstance(value, Tensor):
        array = value.detach().cpu().numpy()
        return array.item() if array.size == 1 and array.ndim == 0 else array
    return value


class SummaryWriter:
    """Writes scalars, histograms, images, text, hyper-parameters and a model's graph for TensorBoard into ``log_dir``
    (``runs/<date>_<host><comment>`` when omitted, as in PyTorch)."""

    def __init__(
        self,
        log_dir: str | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ):
        self._writer = _writer_class()(
            logdir=None if log_dir is None else str(log_dir),
            comment=comment,
            purge_step=purge_step,
            max_queue=max_queue,
            flush_secs=flush_secs,
            filename_suffix=filename_suffix,
        )
        self.log_dir = self._writer.logdir

    def get_logdir(self) -> str:
        return self.log_dir

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
    ) -> None:
        """One point of the curve ``tag`` (a number or a one-element tensor)."""
        value = _plain(scalar_value)
        self._writer.add_scalar(tag, float(np.asarray(value).reshape(-1)[0]), global_step, walltime)

    def add_scalars(
        self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        """Several curves drawn together under ``main_tag``."""
        values = {k: float(np.asarray(_plain(v)).reshape(-1)[0]) for k, v in tag_scalar_dict.items()}
        self._writer.add_scalars(main_tag, values, global_step, walltime)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: int | None = None,
        bins: str = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """The distribution of ``values`` (a tensor or array) at ``global_step``."""
        array = np.asarray(_plain(values), dtype=np.float64).reshape(-1)
        self._writer.add_histogram(tag, array, global_step, bins, walltime, max_bins)

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """An image: floats in [0, 1] or uint8, laid out as ``dataformats`` says (CHW, HWC, HW)."""
        self._writer.add_image(tag, np.asarray(_plain(img_tensor)), global_step, walltime, dataformats)

    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        self._writer.add_text(tag, text_string, global_step, walltime)

    def add_hparams(
        self,
        hparam_dict: dict,
        metric_dict: dict,
        hparam_domain_discrete: dict | None = None,
        run_name: str | None = None,
        global_step: int | None = None,
    ) -> None:
        """A run's hyper-parameters and final metrics, for TensorBoard's HParams table."""
        metrics = {k: float(np.asarray(_plain(v)).reshape(-1)[0]) for k, v in metric_dict.items()}
        self._writer.add_hparams(dict(hparam_dict), metrics, name=run_name, global_step=global_step)

    def add_graph(
        self, model: Any, input_to_model: Any = None, verbose: bool = False, use_strict_trace: bool = True
    ) -> None:
        """The model's graph for TensorBoard's Graphs tab, from one forward call on ``input_to_model`` (a tensor or
        a tuple of them): each module a box named as in ``named_modules``, each op the ``grad_fn`` it made, the
        parameters by name. ``use_strict_trace`` is accepted for PyTorch's signature (there is no tracer to make
        strict); ``verbose`` prints the nodes."""
        from .tensorboard_graph import build_graph_def

        graph = build_graph_def(model, input_to_model)
        if verbose:
            for node in graph.node:
                print(f"{node.name}  {node.op}  <- {', '.join(node.input)}")
        self._writer._get_file_writer().add_onnx_graph(graph)  # writes the GraphDef event, as add_graph does

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
