"""The group of processes a job runs as: rank, size and the collectives, over MPI (mpi4py) or alone.

A process started by ``mpiexec`` (or ``srun``) finds its launcher's variables in the environment and joins the MPI
world; anything else is a world of one, where every collective returns its input and mpi4py is never imported.
Arrays go through MPI from host memory; CuPy arrays go through NCCL when CuPy has it, else through the host.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from enum import Enum

import numpy as np

from ..autograd.backend import xp_of

# what MPICH's hydra, Open MPI, PMIx and Slurm set in each process they start
_LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")


class ReduceOp(Enum):
    """How ``all_reduce`` combines the ranks' values (``trainkit.distributed.ReduceOp.SUM``, as in torch).

    ``AVG`` is the sum divided by the world size (floating dtypes only); ``BAND``, ``BOR`` and ``BXOR`` are the
    bitwise and, or and exclusive or (integer dtypes only).

    >>> ReduceOp.SUM, ReduceOp.AVG.value
    (<ReduceOp.SUM: 'sum'>, 'avg')
    """

    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PRODUCT = "prod"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


def launched_size() -> int:
    """The number of processes the launcher started, from its environment; 1 when there is no launcher.

    >>> launched_size() >= 1
    True
    """
    for name in _LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


class World:
    """The processes of one job. ``World()`` joins MPI's world when a launcher started more than one process.

    >>> w = World()
    >>> w.rank, w.size, w.allreduce(np.ones(2)).tolist()
    (0, 1, [1.0, 1.0])
    """

    def __init__(self) -> None:
        self.comm = None
        self.rank, self.size = 0, 1
        self._nccl = None
        self._local_rank: int | None = None
        if launched_size() > 1:
            try:
                from mpi4py import MPI
            except ImportError:
                raise RuntimeError(
                    f"this process was started by an MPI launcher with {launched_size()} processes, but mpi4py is "
                    "not installed: pip install 'trainkit[distributed]'"
                ) from None
            self._mpi = MPI
            self.comm = MPI.COMM_WORLD
            self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
            if self.size > 1:
                _abort_on_uncaught(self)

    @property
    def local_rank(self) -> int:
        """This process's rank among those on the same machine (which GPU it should take)."""
        if self.comm is None:
            return 0
        if self._local_rank is None:
            self._local_rank = self.comm.Split_type(self._mpi.COMM_TYPE_SHARED).Get_rank()
        return self._local_rank

    def __repr__(self) -> str:
        return f"World(rank={self.rank}, size={self.size}, backend={'mpi' if self.comm is not None else 'none'})"

    # How long a collective may wait for the other ranks, in seconds (None: for ever, MPI's own blocking calls).
    # Past it, the job is aborted with a message instead of hanging on a rank that is stuck or gone.
    timeout: float | None = None

    def _wait(self, request, what: str):
        """Complete a non-blocking collective within ``timeout``; its result (for the object collectives)."""
        deadline = time.monotonic() + self.timeout
        pause = 0.0
        while True:
            done, result = request.test()
            if done:
                return result
            if time.monotonic() > deadline:
                self.abort(
                    f"a collective ({what}) waited more than {self.timeout:g} s for the other ranks "
                    "(trainer.collective_timeout_s, or init_process_group's timeout): a rank is stuck or gone",
                    1,
                )
            time.sleep(pause)
            pause = min(pause + 0.0005, 0.02)  # a step's collective completes at once; a stuck one is polled less

    def _arrive(self, what: str) -> None:
        """With a timeout: wait (so bounded) until every rank reaches the collective that follows; MPI has no
        non-blocking form of the pickled object collectives."""
        if self.timeout is not None:
            self._wait(self.comm.Ibarrier(), what)

    # ----------------------------------------------------------------------------------------- collectives
    def allreduce(self, array, op: ReduceOp = ReduceOp.SUM):
        """Combine ``array`` (NumPy or CuPy, contiguous) over all ranks, in place; returns it."""
        if self.comm is None:
            return array
        if xp_of(array) is not np:
            return self._allreduce_device(array, op)
        if self.timeout is None:
            self.comm.Allreduce(self._mpi.IN_PLACE, array, op=self._mpi_op(op))
        else:
            self._wait(self.comm.Iallreduce(self._mpi.IN_PLACE, array, op=self._mpi_op(op)), "allreduce")
        return array

    def broadcast(self, array, src: int = 0):
        """Overwrite ``array`` on every rank with rank ``src``'s, in place; returns it."""
        if self.comm is None:
            return array
        if xp_of(array) is not np:
            nccl = self._nccl_comm()
            if nccl is not None:
                from cupy.cuda import nccl as nccl_module

                # as bytes: a broadcast copies, so any dtype (bool masks included) goes as uint8
                nccl.bcast(
                    array.data.ptr,
                    array.nbytes,
                    nccl_module.NCCL_UINT8,
                    src,
                    xp_of(array).cuda.get_current_stream().ptr,
                )
                return array
            host = array.get()
            self._bcast(host, src)
            array.set(host)
            return array
        self._bcast(array, src)
        return array

    def _bcast(self, array, src: int) -> None:
        if self.timeout is None:
            self.comm.Bcast(array, root=src)
        else:
            self._wait(self.comm.Ibcast(array, root=src), "broadcast")

    def allgather(self, send, recv):
        """Every rank's ``send`` (host arrays of one shape and dtype) in rank order in ``recv``; returns ``recv``."""
        if self.comm is None:
            recv.reshape(-1)[...] = send.reshape(-1)
            return recv
        return self._host_collective("Allgather", "all_gather", send, recv)

    def reduce(self, send, recv, op: ReduceOp = ReduceOp.SUM, dst: int = 0):
        """``send`` combined over the ranks into ``recv`` on rank ``dst`` (``recv`` is unused elsewhere)."""
        if self.comm is None:
            recv[...] = send
            return recv
        return self._host_collective("Reduce", "reduce", send, recv, op=self._mpi_op(op), root=dst)

    def gather(self, send, recv, dst: int = 0):
        """Every rank's ``send`` in rank order in ``recv`` on rank ``dst`` (None elsewhere)."""
        if self.comm is None:
            recv.reshape(-1)[...] = send.reshape(-1)
            return recv
        return self._host_collective("Gather", "gather", send, recv, root=dst)

    def scatter(self, send, recv, src: int = 0):
        """Rank ``src``'s ``send``, cut into world-size equal parts along its first axis: part r into rank r's
        ``recv`` (``send`` is unused elsewhere)."""
        if self.comm is None:
            recv.reshape(-1)[...] = send.reshape(-1)
            return recv
        return self._host_collective("Scatter", "scatter", send, recv, root=src)

    def reduce_scatter(self, send, recv, op: ReduceOp = ReduceOp.SUM):
        """``send`` (world size equal parts) combined over the ranks; rank r keeps part r in ``recv``."""
        if self.comm is None:
            recv.reshape(-1)[...] = send.reshape(-1)
            return recv
        return self._host_collective("Reduce_scatter_block", "reduce_scatter", send, recv, op=self._mpi_op(op))

    def alltoallv(self, send, send_counts: list[int], recv, recv_counts: list[int]):
        """Rank r's ``send`` cut by ``send_counts`` (part q to rank q); the parts sent to this rank, in rank order,
        into ``recv`` cut by ``recv_counts``. Host arrays; returns ``recv``."""
        if self.comm is None:
            recv[...] = send
            return recv
        send_at = np.concatenate([[0], np.cumsum(send_counts)[:-1]]).astype(int).tolist()
        recv_at = np.concatenate([[0], np.cumsum(recv_counts)[:-1]]).astype(int).tolist()
        return self._host_collective(
            "Alltoallv", "all_to_all", [send, (list(send_counts), send_at)], [recv, (list(recv_counts), recv_at)]
        )

    def send(self, array, dst: int, tag: int = 0) -> None:
        """Send the host array ``array`` to rank ``dst``."""
        if self.timeout is None:
            self.comm.Send(array, dest=dst, tag=tag)
        else:
            self._wait(self.comm.Isend(array, dest=dst, tag=tag), "send")

    def recv(self, array, src: int | None = None, tag: int = 0) -> int:
        """Receive into the host array ``array`` from rank ``src`` (any rank when None); the sender's rank."""
        status = self._mpi.Status()
        source = self._mpi.ANY_SOURCE if src is None else src
        if self.timeout is None:
            self.comm.Recv(array, source=source, tag=tag, status=status)
        else:
            request = self.comm.Irecv(array, source=source, tag=tag)
            deadline = time.monotonic() + self.timeout
            while not request.Test(status):
                if time.monotonic() > deadline:
                    self.abort(f"a receive waited more than {self.timeout:g} s for rank {src}: it is stuck or gone")
                time.sleep(0.001)
        return status.Get_source()

    def isend(self, array, dst: int, tag: int = 0):
        """Start sending ``array`` to rank ``dst``; the MPI request (``array`` must stay untouched until done)."""
        return self.comm.Isend(array, dest=dst, tag=tag)

    def irecv(self, array, src: int | None = None, tag: int = 0):
        """Start receiving into ``array`` from rank ``src`` (any rank when None); the MPI request."""
        return self.comm.Irecv(array, source=self._mpi.ANY_SOURCE if src is None else src, tag=tag)

    def _host_collective(self, name: str, what: str, send, recv, **options):
        """Run MPI's ``name`` on host arrays, or its non-blocking form within ``timeout``."""
        if self.timeout is None:
            getattr(self.comm, name)(send, recv, **options)
        else:
            self._wait(getattr(self.comm, "I" + name[0].lower() + name[1:])(send, recv, **options), what)
        return recv

    def broadcast_object(self, obj, src: int = 0):
        """Rank ``src``'s ``obj`` on every rank (pickled by mpi4py: for small, trusted values only)."""
        if self.comm is None:
            return obj
        self._arrive("broadcast")
        return self.comm.bcast(obj, root=src)

    def gather_object(self, obj, dst: int = 0) -> list | None:
        """Every rank's ``obj`` as a list on rank ``dst`` (None elsewhere)."""
        if self.comm is None:
            return [obj]
        self._arrive("gather")
        return self.comm.gather(obj, root=dst)

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        if self.comm is not None:
            if self.timeout is None:
                self.comm.Barrier()
            else:
                self._wait(self.comm.Ibarrier(), "barrier")

    # Set once abort has begun: the SystemExit it raises must not abort a second time on its way out.
    aborting = False

    # Whether callers of abort show the traceback of the error behind it, as Python does for an uncaught error; the
    # trainkit command keeps its one-line errors unless --debug.
    show_traceback = True

    def abort(self, message: str, code: int = 1, detail: str = "") -> None:
        """Print ``detail`` (a traceback, say) and ``message``, then end every rank of the job: the others may be
        waiting in a collective forever."""
        self.aborting = True
        sys.stderr.write(
            f"{detail}trainkit: rank {self.rank} of {self.size}: {message}; aborting all {self.size} ranks\n"
        )  # one write: the launcher relays it whole
        sys.stderr.flush()
        if self.comm is not None:
            try:  # the launcher relays output asynchronously and stops once the job is aborted: give it a moment
                time.sleep(0.2)
            finally:  # even when a second Ctrl-C cuts the pause short
                self.comm.Abort(code)
        raise SystemExit(code)

    # ------------------------------------------------------------------------------------------- internals
    def _mpi_op(self, op: ReduceOp):
        return {
            ReduceOp.SUM: self._mpi.SUM,
            ReduceOp.MAX: self._mpi.MAX,
            ReduceOp.MIN: self._mpi.MIN,
            ReduceOp.PRODUCT: self._mpi.PROD,
            ReduceOp.BAND: self._mpi.BAND,
            ReduceOp.BOR: self._mpi.BOR,
            ReduceOp.BXOR: self._mpi.BXOR,
        }[op]

    def _allreduce_device(self, array, op: ReduceOp):
        nccl = self._nccl_comm()
        if nccl is not None:
            from cupy.cuda import nccl as nccl_module

            ops = {
                ReduceOp.SUM: nccl_module.NCCL_SUM,
                ReduceOp.MAX: nccl_module.NCCL_MAX,
                ReduceOp.MIN: nccl_module.NCCL_MIN,
                ReduceOp.PRODUCT: nccl_module.NCCL_PROD,
            }
            stream = xp_of(array).cuda.get_current_stream().ptr
            nccl.allReduce(array.data.ptr, array.data.ptr, array.size, _nccl_dtype(array.dtype), ops[op], stream)
            return array
        host = array.get()  # no NCCL: through host memory
        if self.timeout is None:
            self.comm.Allreduce(self._mpi.IN_PLACE, host, op=self._mpi_op(op))
        else:
            self._wait(self.comm.Iallreduce(self._mpi.IN_PLACE, host, op=self._mpi_op(op)), "allreduce")
        array.set(host)
        return array

    def _nccl_comm(self):
        """A NCCL communicator over the same ranks (made on first use), or None when CuPy has no NCCL."""
        if self._nccl is None:
            try:
                from cupy.cuda import nccl
            except ImportError:
                self._nccl = False
                return None
            if not getattr(nccl, "available", True):
                self._nccl = False
                return None
            uid = self.comm.bcast(nccl.get_unique_id() if self.rank == 0 else None, root=0)
            self._nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        return self._nccl or None


def _abort_on_uncaught(group: World) -> None:
    """An exception nobody catches ends the whole job: the other ranks may be waiting in a collective for this
    one, and this one would wait for them in MPI_Finalize."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        detail = ""
        if previous is sys.__excepthook__:
            detail = "".join(traceback.format_exception(kind, value, tb))
        else:
            previous(kind, value, tb)
        group.abort(
            "interrupted" if issubclass(kind, KeyboardInterrupt) else f"uncaught {kind.__name__}: {value}",
            130 if issubclass(kind, KeyboardInterrupt) else 1,
            detail,
        )

    sys.excepthook = hook


def _nccl_dtype(dtype):
    from cupy.cuda import nccl

    return {
        np.dtype(np.float32): nccl.NCCL_FLOAT32,
        np.dtype(np.float64): nccl.NCCL_FLOAT64,
        np.dtype(np.float16): nccl.NCCL_FLOAT16,
        np.dtype(np.int64): nccl.NCCL_INT64,
        np.dtype(np.int32): nccl.NCCL_INT32,
    }[np.dtype(dtype)]


_world: World | None = None


def world() -> World:
    """This process's ``World``, made on first use (``init_process_group`` makes it explicitly).

    >>> world().size >= 1
    True
    """
    global _world
    if _world is None:
        _world = World()
    return _world


def joined() -> bool:
    """Whether this process has joined its world (``world()`` has been called).

    >>> _ = world(); joined()
    True
    """
    return _world is not None
