"""torch.distributed's default process group, over trainkit's MPI world: ``init_process_group`` and the queries.

Every backend name torch takes for CPU or GPU training (``"gloo"``, ``"mpi"``, ``"nccl"``) runs over the world the
MPI launcher started (``mpiexec``, ``trainkit run-torch --nproc N``); ``init_method="env://"`` reads torchrun's
variables and checks them against that world, and without a launcher the world is this process alone.
"""

from __future__ import annotations

import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

from .comm import World, joined, world

NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
# the rendezvous schemes torch knows: with a launcher MPI has done the rendezvous, so only their arguments count
SCHEMES = ("env", "tcp", "file")


class Backend(str):
    """A backend's name as torch spells it: ``Backend("GLOO") == "gloo"`` (a plain ``str``, as in torch).

    >>> Backend("GLOO"), Backend.NCCL
    ('gloo', 'nccl')
    """

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UCC = "ucc"

    def __new__(cls, name: str) -> str:  # type: ignore[misc]
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        value = getattr(Backend, name.upper(), None)
        return str(value if isinstance(value, str) else name.lower())


class ProcessGroup:
    """A group of ranks and the backend it was made with; trainkit's groups span the whole world.

    >>> g = ProcessGroup(World(), "gloo")
    >>> g.rank(), g.size(), g.name()
    (0, 1, 'gloo')
    """

    def __init__(self, group_world: World, backend: str):
        self.world = group_world
        self.backend = backend

    def rank(self) -> int:
        """This process's rank in the group."""
        return self.world.rank

    def size(self) -> int:
        """How many ranks the group has."""
        return self.world.size

    def name(self) -> str:
        """The backend's name."""
        return self.backend

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()})"


class _Default:
    """The default group (None until ``init_process_group``) and what ``init_process_group`` changed."""

    group: ProcessGroup | None = None
    timeout_before: float | None = None
    # torch's rule, that only init_process_group makes a group: from a program's first init_process_group on, and
    # from the start in a PyTorch program (trainkit run-torch); before that, trainkit's own joined world counts
    strict = False


class WorldMeta(type):
    """Gives ``group.WORLD`` and ``GroupMember.WORLD`` torch's meaning: the default group, None before
    ``init_process_group``."""

    @property
    def WORLD(cls) -> ProcessGroup | None:  # noqa: N802  (torch's name)
        return _Default.group


class group(metaclass=WorldMeta):  # noqa: N801  (torch's name)
    """``group.WORLD``: the default process group (None before ``init_process_group``).

    >>> group.WORLD is None or isinstance(group.WORLD, ProcessGroup)
    True
    """


class GroupMember(metaclass=WorldMeta):
    """``GroupMember.WORLD`` is ``group.WORLD``; ``NON_GROUP_MEMBER`` is the rank a non-member gets.

    >>> GroupMember.NON_GROUP_MEMBER
    -100
    """

    NON_GROUP_MEMBER = -100


def backend_name(backend) -> str:
    """The backend ``init_process_group`` runs, checked: a CPU machine has no NCCL, as torch's CPU build.

    >>> backend_name("GLOO"), backend_name(None)
    ('gloo', 'undefined')
    """
    name = Backend("undefined" if backend is None else backend)
    for part in name.split(","):  # torch's "cpu:gloo,cuda:nccl" form
        kind = part.rpartition(":")[2]
        if kind not in ("undefined", "gloo", "mpi", "nccl"):
            raise AssertionError(f"Unknown backend type {kind} (trainkit runs 'gloo', 'mpi' and 'nccl' over MPI)")
        if kind == "nccl" and not nccl_usable():
            raise BackendUnavailableError(
                "Distributed package doesn't have NCCL built in: 'nccl' is not supported on a machine without a "
                "CUDA GPU; use 'gloo' (or 'mpi'), which runs over MPI as 'nccl' would"
            )
    return name


class BackendUnavailableError(RuntimeError, ValueError):
    """A backend this machine cannot run (torch raises RuntimeError; trainkit's earlier ValueError is kept)."""


def nccl_usable() -> bool:
    """Whether a CUDA GPU is there for the ``"nccl"`` backend (through CuPy).

    >>> isinstance(nccl_usable(), bool)
    True
    """
    try:
        import cupy
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001  (a CuPy without a driver raises its own error types)
        return False


def env_error(scheme: str, what: str) -> ValueError:
    """torch's error for a rendezvous that lacks what it needs."""
    return ValueError(f"Error initializing torch.distributed using {scheme}:// rendezvous: {what}")


def rendezvous(init_method: str, rank: int, world_size: int, the_world: World, store) -> None:
    """Check what ``init_method`` and the arguments say against the world MPI made (or this process alone)."""
    if not isinstance(init_method, str):
        raise RuntimeError(f"`url` must be a string. {type(init_method)}: {init_method}")
    url = urlparse(init_method)
    if url.scheme not in SCHEMES:
        raise RuntimeError(f"No rendezvous handler for {url.scheme}://")
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    rank = int(query.get("rank", rank))
    world_size = int(query.get("world_size", world_size))
    if url.scheme == "env" and store is None:
        if rank == -1:
            rank = int(environment("RANK", the_world))
        if world_size == -1:
            world_size = int(environment("WORLD_SIZE", the_world))
        if the_world.comm is None:  # torch's own order of checks, for a process no launcher started
            environment("MASTER_ADDR", the_world)
            environment("MASTER_PORT", the_world)
    elif the_world.comm is None and store is None and (rank == -1 or world_size == -1):
        raise env_error(url.scheme, "rank parameter missing" if rank == -1 else "world size parameter missing")
    launcher = "MPI launcher" if the_world.comm is not None else "launcher"
    if world_size not in (-1, the_world.size):
        hint = (
            f"start it with `trainkit run-torch --nproc {world_size} SCRIPT` or `mpiexec -n {world_size} ...`"
            if the_world.comm is None
            else "WORLD_SIZE and world_size must be the number of processes mpiexec started"
        )
        raise RuntimeError(
            f"init_process_group: world_size is {world_size}, but the {launcher} started {the_world.size} "
            f"process{'es' if the_world.size > 1 else ''} (trainkit's process groups run over MPI): {hint}"
        )
    if rank not in (-1, the_world.rank):
        raise RuntimeError(
            f"init_process_group: rank is {rank}, but the {launcher} made this process rank {the_world.rank} "
            f"of {the_world.size}: RANK and rank must be the launcher's"
        )


def environment(name: str, the_world: World) -> str:
    """A torchrun variable; under an MPI launcher that did not set it, MPI's own answer."""
    value = os.environ.get(name)
    if value:
        return value
    if the_world.comm is not None:
        return str({"RANK": the_world.rank, "WORLD_SIZE": the_world.size}.get(name, ""))
    raise env_error("env", f"environment variable {name} expected, but not set")


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Make the default process group: the world the MPI launcher started, whatever backend is named.

    ``init_method`` ``"env://"`` (the default) reads torchrun's ``RANK`` and ``WORLD_SIZE`` (set by
    ``trainkit run-torch --nproc N``; under a bare ``mpiexec`` MPI's rank and size stand in) and checks them against
    MPI's; ``timeout`` bounds every collective (a stuck rank aborts the job). ``"nccl"`` needs a CUDA GPU, as it
    does in torch's CPU build.

    >>> init_process_group("gloo", "tcp://localhost:29500", rank=0, world_size=1)
    >>> get_rank(), get_world_size(), get_backend()
    (0, 1, 'gloo')
    >>> destroy_process_group()
    """
    if _Default.group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None and init_method is not None:
        raise AssertionError("Cannot specify both init_method and store.")
    if store is not None:
        if not world_size > 0:
            raise AssertionError("world_size must be positive if using store")
        if not rank >= 0:
            raise AssertionError("rank must be non-negative if using store")
    name = backend_name(backend)
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {timeout}")
    the_world = world()
    rendezvous(init_method or "env://", rank, world_size, the_world, store)  # with a store, MPI's rank and size
    _Default.timeout_before = the_world.timeout
    if timeout is not None and the_world.comm is not None:
        the_world.timeout = timeout.total_seconds()
    _Default.group = ProcessGroup(the_world, name)
    _Default.strict = True


def follow_torch_rules() -> None:
    """From now on only ``init_process_group`` makes the default group, as in torch: before it, the queries and
    the collectives raise torch's error even where trainkit has joined the launcher's world (``trainkit run-torch``
    calls this before a PyTorch program starts).

    >>> follow_torch_rules()  # doctest: +SKIP
    """
    _Default.strict = True


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Undo ``init_process_group`` (the MPI world stays joined: a later ``init_process_group`` takes it again).

    >>> is_initialized()
    False
    """
    if _Default.group is None:
        raise AssertionError("Process group cannot be None")
    if group is not None and group is not _Default.group:
        raise ValueError("destroy_process_group: trainkit's only process group is the default one")
    _Default.group.world.timeout = _Default.timeout_before
    _Default.group = None


def is_initialized() -> bool:
    """Whether ``init_process_group`` has made the default group (and ``destroy_process_group`` has not undone it).

    >>> is_initialized()
    False
    """
    return _Default.group is not None


def is_torchelastic_launched() -> bool:
    """Whether torchrun (or ``trainkit run-torch --nproc N``, which sets what it sets) started this process.

    >>> isinstance(is_torchelastic_launched(), bool)
    True
    """
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def default_group() -> ProcessGroup:
    """The default group; in a trainkit program that never called ``init_process_group``, the world trainkit
    itself joined (the Trainer's ``strategy="ddp"``, ``DistributedDataParallel``, a collective); else torch's
    error.

    >>> default_group()  # doctest: +SKIP
    ValueError: Default process group has not been initialized, please make sure to call init_process_group.
    """
    if _Default.group is not None:
        return _Default.group
    if joined() and not _Default.strict:
        return ProcessGroup(world(), "mpi")
    raise ValueError(NOT_INITIALIZED)


def collective_group(group: ProcessGroup | None = None) -> ProcessGroup:
    """The group a collective runs in: ``group``, the default one, or (in a trainkit program that never called
    ``init_process_group``, as trainkit always did) the launcher's world, joined now."""
    if group is not None:
        if not isinstance(group, ProcessGroup):
            raise TypeError(f"group must be a ProcessGroup (dist.group.WORLD or new_group()), got {group!r}")
        return group
    if _Default.group is not None:
        return _Default.group
    if _Default.strict:
        raise ValueError(NOT_INITIALIZED)
    return ProcessGroup(world(), "mpi")


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank, 0 to world size - 1.

    >>> get_rank()  # doctest: +SKIP
    0
    """
    return (group or default_group()).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """How many processes the group (the default one) has.

    >>> get_world_size()  # doctest: +SKIP
    2
    """
    return (group or default_group()).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The backend's name as ``init_process_group`` got it (``"undefined"`` when it named none, as torch).

    >>> get_backend()  # doctest: +SKIP
    'gloo'
    """
    return (group or default_group()).backend


def new_group(
    ranks=None,
    timeout=None,
    backend=None,
    pg_options=None,
    use_local_synchronization=False,
    group_desc=None,
    device_id=None,
) -> ProcessGroup:
    """A group of ``ranks``: trainkit has the whole world only, so ``ranks`` must be None or every rank.

    >>> new_group()  # doctest: +SKIP
    ProcessGroup(backend='gloo', rank=0, size=2)
    """
    whole = default_group()
    if ranks is not None and sorted(int(r) for r in ranks) != list(range(whole.size())):
        raise NotImplementedError(
            f"new_group(ranks={list(ranks)}): trainkit's process groups span the whole world of {whole.size()} "
            "ranks; a subgroup is not supported (use ranks=None)"
        )
    return whole


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    """The world ranks of ``group``'s members, in group order: every rank here.

    >>> get_process_group_ranks(ProcessGroup(World(), "gloo"))
    [0]
    """
    return list(range((group or default_group()).size()))


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The world rank of ``group``'s rank ``group_rank``: the same number, as groups span the world.

    >>> get_global_rank(ProcessGroup(World(), "gloo"), 0)
    0
    """
    return check_member(group, group_rank)


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """``group``'s rank of the world rank ``global_rank``: the same number, as groups span the world.

    >>> get_group_rank(ProcessGroup(World(), "gloo"), 0)
    0
    """
    return check_member(group, global_rank)


def check_member(group: ProcessGroup, rank: int) -> int:
    if not 0 <= rank < group.size():
        raise ValueError(f"Group {group} does not contain rank {rank}")
    return rank


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its machine, from ``LOCAL_RANK`` (set by ``trainkit run-torch``), else
    ``fallback_rank``.

    >>> get_node_local_rank(fallback_rank=0) >= 0
    True
    """
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow `get_node_local_rank` to "
        "work, assuming you are not running in a multi-device context and want the code to run locally instead."
    )


def is_backend_available(backend: str) -> bool:
    """Whether ``init_process_group(backend)`` can run here: ``"gloo"`` and ``"mpi"`` with mpi4py (or alone),
    ``"nccl"`` with a CUDA GPU.

    >>> is_backend_available("gloo"), is_backend_available("foo")
    (True, False)
    """
    name = str(backend).lower()
    if name == "nccl":
        return nccl_usable()
    return name in ("gloo", "mpi")
