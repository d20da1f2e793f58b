"""Communication for the distributed factorizations: counted collectives and the all-ranks error agreement.

Every payload that the factorizations move goes through these helpers, so :func:`traffic` can report the bytes
each rank sent and received (the quantity the seed 003 §3.5 bounds). Broadcasts count the payload once as sent
by the root and once as received by every other rank, whatever tree the MPI library uses underneath.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np


def mpi():
    """The ``mpi4py.MPI`` module, imported on first use so that ``import hetlapack`` never loads MPI."""
    from mpi4py import MPI

    return MPI


@dataclass
class Traffic:
    """Payload bytes and message count of the collectives this rank took part in."""

    sent: int = 0
    received: int = 0
    messages: int = 0
    by_kind: dict = field(default_factory=dict)

    def add(self, kind: str, sent: int, received: int) -> None:
        """Count one message of ``kind`` with the bytes this rank sent and received."""
        self.sent += sent
        self.received += received
        self.messages += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + received

    def as_dict(self) -> dict:
        """The counters as a plain dictionary: bytes sent and received, messages, and bytes received by kind."""
        return {"sent": self.sent, "received": self.received, "messages": self.messages, "by_kind": dict(self.by_kind)}


_TRAFFIC = Traffic()


def traffic() -> Traffic:
    """This rank's counters since the last :func:`reset_traffic`."""
    return _TRAFFIC


def reset_traffic() -> None:
    """Zero this rank's communication counters."""
    global _TRAFFIC
    _TRAFFIC = Traffic()


def _displacements(sizes: np.ndarray) -> np.ndarray:
    """Start offset of each rank's part in a buffer holding parts of ``sizes`` elements side by side."""
    return np.concatenate(([0], np.cumsum(sizes)[:-1]))


def bcast_array(comm, array: np.ndarray | None, root: int, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Broadcast an array of known ``shape`` from ``root``; every rank returns a Fortran-ordered copy."""
    if comm.size == 1:
        return np.asfortranarray(array)
    buf = np.asfortranarray(array) if comm.rank == root else np.empty(shape[::-1], dtype=dtype).T
    if buf.size:
        comm.Bcast(buf.T, root=root)
    me_root = comm.rank == root
    _TRAFFIC.add("bcast", buf.nbytes * (comm.size - 1) if me_root else 0, 0 if me_root else buf.nbytes)
    return buf


def allgather_rows(comm, rows: np.ndarray, width: int, dtype) -> list[np.ndarray]:
    """Allgather row blocks of a common ``width``; returns the blocks of every rank, in rank order."""
    if comm.size == 1:
        return [rows]
    counts = np.array(comm.allgather(rows.shape[0]), dtype=np.int64)
    sendbuf = np.ascontiguousarray(rows, dtype=dtype)
    recv = np.empty((int(counts.sum()), width), dtype=dtype)
    sizes = counts * width
    if recv.size:
        offsets = _displacements(sizes)
        comm.Allgatherv(sendbuf, [recv, (sizes, offsets)])
    _TRAFFIC.add("allgather", sendbuf.nbytes * (comm.size - 1), recv.nbytes - sendbuf.nbytes)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    return [recv[bounds[r]:bounds[r + 1]] for r in range(comm.size)]


def allreduce_sum(comm, array: np.ndarray) -> np.ndarray:
    """Elementwise sum of ``array`` over ``comm``, returned on every rank."""
    if comm.size == 1:
        return array
    buf = np.ascontiguousarray(array)
    out = np.empty_like(buf)
    if buf.size:
        comm.Allreduce(buf, out, op=mpi().SUM)
    _TRAFFIC.add("allreduce", buf.nbytes, buf.nbytes)
    return out


def allgather_objects(comm, value):
    """Allgather small Python objects (metadata such as dtypes), counted by their pickled size."""
    if comm.size == 1:
        return [value]
    values = comm.allgather(value)
    nbytes = len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    _TRAFFIC.add("allgather", nbytes * (comm.size - 1), sum(len(pickle.dumps(v)) for v in values) - nbytes)
    return values


def alltoall_rows(comm, outgoing: list[np.ndarray], incoming_counts: list[int], width: int, dtype) -> list[np.ndarray]:
    """Personalised all-to-all of row blocks of a common ``width``: ``outgoing[r]`` goes to rank ``r``.

    Every rank knows how many rows it gets from each rank (``incoming_counts``), so one ``Alltoallv`` moves them.
    """
    if comm.size == 1:
        return outgoing
    send_counts = np.array([block.shape[0] for block in outgoing], dtype=np.int64) * width
    recv_counts = np.asarray(incoming_counts, dtype=np.int64) * width
    sendbuf = np.concatenate([np.ascontiguousarray(block, dtype=dtype).ravel() for block in outgoing])
    recvbuf = np.empty(int(recv_counts.sum()), dtype=dtype)
    send_offsets = _displacements(send_counts)
    recv_offsets = _displacements(recv_counts)
    comm.Alltoallv([sendbuf, (send_counts, send_offsets)], [recvbuf, (recv_counts, recv_offsets)])
    me = comm.rank
    itemsize = np.dtype(dtype).itemsize
    _TRAFFIC.add("alltoall", int(send_counts.sum() - send_counts[me]) * itemsize,
                 int(recv_counts.sum() - recv_counts[me]) * itemsize)
    return [recvbuf[o:o + c].reshape(rows, width) for o, c, rows in zip(recv_offsets, recv_counts, incoming_counts)]


def gather_rows(comm, rows: np.ndarray, counts: list[int], root: int) -> list[np.ndarray] | None:
    """Gather row blocks of a common width onto ``root`` (one ``Gatherv``); ``counts[r]`` rows come from rank ``r``.

    ``root`` returns every rank's block in rank order (C-ordered views of one buffer), the others ``None``.
    """
    if comm.size == 1:
        return [rows]
    width, dtype = rows.shape[1], rows.dtype
    sendbuf = np.ascontiguousarray(rows)
    sizes = np.asarray(counts, dtype=np.int64) * width
    offsets = _displacements(sizes)
    recv = np.empty(int(sizes.sum()), dtype=dtype) if comm.rank == root else None
    comm.Gatherv(sendbuf, [recv, (sizes, offsets)] if comm.rank == root else None, root=root)
    if comm.rank != root:
        _TRAFFIC.add("gather", sendbuf.nbytes, 0)
        return None
    _TRAFFIC.add("gather", 0, (int(sizes.sum()) - sendbuf.size) * sendbuf.itemsize)
    return [recv[o:o + s].reshape(c, width) for o, s, c in zip(offsets, sizes, counts)]


def scatter_rows(comm, blocks: list[np.ndarray] | None, counts: list[int], width: int, dtype, root: int
                 ) -> np.ndarray:
    """Inverse of :func:`gather_rows`: ``root`` sends ``blocks[r]`` to rank ``r``; every rank returns its block."""
    if comm.size == 1:
        return blocks[0]
    sizes = np.asarray(counts, dtype=np.int64) * width
    offsets = _displacements(sizes)
    mine = np.empty((counts[comm.rank], width), dtype=dtype)
    sendbuf = None
    if comm.rank == root:
        sendbuf = np.concatenate([np.ascontiguousarray(b, dtype=dtype).ravel() for b in blocks])
    comm.Scatterv([sendbuf, (sizes, offsets)] if comm.rank == root else None, mine, root=root)
    if comm.rank == root:
        _TRAFFIC.add("scatter", (int(sizes.sum()) - mine.size) * mine.itemsize, 0)
    else:
        _TRAFFIC.add("scatter", 0, mine.nbytes)
    return mine


class RemoteRankError(RuntimeError):
    """Raised on ranks that did not fail when another rank's exception could not be re-created there."""


def _raise_first_failure(comm, error: Exception | None) -> None:
    """Collective: if any rank of ``comm`` holds an error, raise the lowest failing rank's error on every rank."""
    if comm.size > 1 and comm.allreduce(error is not None, op=mpi().LOR):
        try:
            payload = pickle.dumps(error)
        except Exception:  # noqa: BLE001 - unpicklable exceptions travel as text
            payload = pickle.dumps(RemoteRankError(f"{type(error).__name__}: {error}"))
        gathered = comm.allgather(payload if error is not None else None)
        first = next(r for r, p in enumerate(gathered) if p is not None)
        if error is None:
            remote = pickle.loads(gathered[first])
            raise remote from RemoteRankError(f"raised on rank {first} of {comm.size}")
    if error is not None:
        raise error


class FailureLatch:
    """Holds this rank's first local failure until the next agreement point, so that ranks keep in step.

    Local sections run under :meth:`guard`; a failure there is kept and the rank goes on taking part in the
    collectives that follow (their message sizes never depend on the values), which lets a factorization agree
    once per step instead of after every local section and so overlap the next panel with the trailing update.
    :meth:`agree` is collective over ``comm`` and raises the lowest failing rank's exception on every rank.
    """

    def __init__(self, comm):
        self.comm = comm
        self.error: Exception | None = None

    @contextmanager
    def guard(self):
        """Run a local section; keep its exception (the first one only) instead of raising it now."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - every failure must reach the other ranks
            self.error = self.error or exc

    def agree(self) -> None:
        """Collective: raise on every rank if any rank's guarded section failed since the latch was made."""
        _raise_first_failure(self.comm, self.error)


@contextmanager
def agreed(comm):
    """Run a local section on every rank of ``comm``; if any rank raised, every rank raises after it.

    The exception of the lowest failing rank is re-raised on every rank (the failing rank raises its own), so a
    ``LinAlgError`` from the rank that owns a diagonal block reaches all ranks with the same type and text and no
    rank is left waiting in the next collective. Place one after each local section that can fail.
    """
    latch = FailureLatch(comm)
    with latch.guard():
        yield
    latch.agree()


def agree_arguments(comm, **arguments) -> None:
    """Collective: raise the same ``ValueError`` on every rank of ``comm`` unless all ranks passed equal arguments.

    Every routine of :mod:`hetlapack.mpi` is collective; ranks that disagree on an argument (``lower``, a QR mode, a
    block size, a dtype) would take different paths through the collectives and wait for each other forever. One
    allgather of the small values (scalars, strings, tuples) turns that into an error that names the argument.
    """
    if comm.size == 1:
        return
    everyone = allgather_objects(comm, arguments)
    for name, first in everyone[0].items():
        for rank, theirs in enumerate(everyone[1:], start=1):
            if not np.array_equal(first, theirs[name]):
                raise ValueError(f"every rank must pass the same {name}: rank 0 passed {first!r}, "
                                 f"rank {rank} passed {theirs[name]!r}")
