"""``DistributedDataParallel``: a Module wrapper whose ``backward`` leaves every rank with the averaged gradients,
for training loops written by hand (the Trainer does the same itself with ``strategy="ddp"``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..layers.module import Module
from .comm import World, world
from .process_group import ProcessGroup
from .reducer import GradientReducer, broadcast_tensors


class DistributedDataParallel(Module):
    """Wrap ``module`` so that each ``backward`` through it ends with the gradients averaged over the ranks.

    Takes torch's arguments: ``device_ids`` and ``output_device`` only for a module on a GPU (as torch refuses
    them for a CPU module), ``process_group`` a ``ProcessGroup`` (when None, the default group, or the launcher's
    world where no ``init_process_group`` made one), ``init_sync``
    whether rank 0's weights are sent at construction; ``static_graph``, ``check_reduction`` and the others change
    nothing here. ``state_dict()`` keys start with ``module.``, as torch's.

    At construction every rank takes rank 0's parameters and buffers; with ``broadcast_buffers`` the buffers
    (BatchNorm's running statistics) are taken from rank 0 again before each forward. Once the last trainable
    parameter's grad has been accumulated in a backward, the grads are averaged in buckets of ``bucket_cap_mb``.
    The backward of a forward run inside ``with ddp.no_sync():`` (or with ``require_backward_grad_sync`` False) only
    accumulates locally; the next one outside averages the sum.
    Every trainable parameter must take part in the loss: one that does not is reported at the next forward.

    >>> import trainkit
    >>> model = DistributedDataParallel(trainkit.nn.Linear(2, 1))
    >>> model(trainkit.ones(4, 2)).sum().backward()
    >>> model.module.bias.grad
    tensor([4.])
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group: ProcessGroup | World | None = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        delay_all_reduce_named_params=None,
        param_to_hook_all_reduce=None,
        mixed_precision=None,
        device_mesh=None,
        skip_all_reduce_unused_params: bool = False,
        bucket_cap_mb_list=None,
        batched_grad_copy: bool = False,
        forward_sync_buffers: bool | None = None,
    ):
        super().__init__()
        for name, value in (("mixed_precision", mixed_precision), ("device_mesh", device_mesh)):
            if value is not None:
                raise NotImplementedError(f"DistributedDataParallel({name}=...) is not supported")
        devices = {p.device for p in module.parameters()}
        if (device_ids or output_device is not None) and all(d.type == "cpu" for d in devices):
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with "
                "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                f"{device_ids}, output_device {output_device}, and module parameters {devices}."
            )
        if find_unused_parameters:
            raise NotImplementedError(
                "DistributedDataParallel(find_unused_parameters=True) is not supported: every trainable parameter "
                "must take part in the loss (freeze the others with requires_grad_(False)), or train with "
                "Trainer(strategy='ddp'), which averages after backward and counts a missing grad as zero"
            )
        if dim != 0:
            raise NotImplementedError("DistributedDataParallel splits nothing itself: dim must be 0")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        # torch's switch (nanoGPT sets it by hand): read at each forward, as torch does, to decide whether the
        # backward of that forward averages the grads
        self.require_backward_grad_sync = True
        if isinstance(process_group, ProcessGroup):
            process_group = process_group.world
        group = process_group if process_group is not None else world()
        object.__setattr__(self, "_group", group)
        if init_sync:
            broadcast_tensors(list(module.parameters()) + [b for b in module.buffers() if b is not None], 0, group)
        reducer = GradientReducer(module.parameters(), 25.0 if bucket_cap_mb is None else bucket_cap_mb, group)
        object.__setattr__(self, "_reducer", reducer)
        object.__setattr__(self, "_sync", True)
        object.__setattr__(self, "_manual", False)  # set by a Trainer that calls the collectives itself
        object.__setattr__(self, "_ready", set())
        object.__setattr__(self, "_hooked", {})
        self._hook_trainable()

    @property
    def reducer(self) -> GradientReducer:
        """The ``GradientReducer`` that averages the wrapped module's gradients over the ranks (in buckets).

        >>> import trainkit
        >>> type(DistributedDataParallel(trainkit.nn.Linear(2, 1)).reducer).__name__
        'GradientReducer'
        """
        return self._reducer

    @property
    def manual_reduction(self) -> bool:
        """False (the default): each backward ends with the gradients averaged. True: the forward only runs the
        module and backward only accumulates; the caller averages with ``reducer.reduce()`` at points of its own,
        the same on every rank (the Trainer does, with ``strategy="ddp"``).

        >>> import trainkit
        >>> model = DistributedDataParallel(trainkit.nn.Linear(2, 1))
        >>> model.manual_reduction = True
        >>> model(trainkit.ones(4, 2)).sum().backward()
        >>> model.reducer.reduce()
        >>> model.module.bias.grad
        tensor([4.])
        """
        return self._manual

    @manual_reduction.setter
    def manual_reduction(self, value: bool) -> None:
        object.__setattr__(self, "_manual", bool(value))

    def _hook_trainable(self) -> None:
        """Watch every trainable parameter's grad (also those unfrozen since the last forward)."""
        for p in self.module.parameters():
            if p.requires_grad and id(p) not in self._hooked:
                self._hooked[id(p)] = p.register_post_accumulate_grad_hook(self._grad_ready)

    def _trainable(self) -> list:
        return [p for p in self.module.parameters() if p.requires_grad]

    def _grad_ready(self, param) -> None:
        if not self._sync or self._manual:
            return
        self._ready.add(id(param))
        if len(self._ready) == len(self._trainable()):
            self._ready.clear()
            self._reducer.reduce()

    def forward(self, *args, **kwargs):
        if self._manual:
            return self.module(*args, **kwargs)
        object.__setattr__(self, "_sync", bool(self.require_backward_grad_sync))
        self._hook_trainable()
        if self._ready:
            trainable = self._trainable()
            missing = [
                name for name, p in self.module.named_parameters() if p.requires_grad and id(p) not in self._ready
            ]
            self._ready.clear()
            raise RuntimeError(
                f"Expected to have finished reduction in the prior iteration before starting a new one: "
                f"{len(missing)} of {len(trainable)} trainable parameters got no gradient in the last backward "
                f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}). Make every output that depends "
                "on them take part in the loss, or freeze them with requires_grad_(False)."
            )
        if self.broadcast_buffers and self._group.size > 1:
            buffers = [b for b in self.module.buffers() if b is not None]
            if buffers:
                broadcast_tensors(buffers, 0, self._group)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """The backward of each forward run inside only accumulates grads locally; the first forward and backward
        after averages the sum (as torch: the forward must be inside)."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before
