"""The rest of Mooncake's module-level names in ``mooncake.store``: task enums and records,
the replica descriptors' parts, the tensor-parallel request types, and the three module
functions (bind_to_numa_node, get_alloc_func_addr, get_free_func_addr).

Spec: Mooncake's binding (mooncake-integration/store/store_py.cpp, PYBIND11_MODULE(store)).
Each class keeps the fields pybind11 exposes there; where behaviour differs the docstring says.
"""

import ctypes
import ctypes.util
import enum
import logging
import os
from typing import Any, List, Optional


class ErrorCode(enum.IntEnum):
    """Mooncake's error codes (the numbers its Python API returns): a column of the error
    table in internal/base/errtable.go; a Go test (internal/repotest) fails when they disagree."""

    OK = 0
    INTERNAL_ERROR = -1
    BUFFER_OVERFLOW = -10
    SEGMENT_NOT_FOUND = -101
    NO_AVAILABLE_HANDLE = -200
    INVALID_VERSION = -300
    INVALID_KEY = -400
    INVALID_PARAMS = -600
    REPLICA_IS_NOT_READY = -703
    OBJECT_NOT_FOUND = -704
    OBJECT_ALREADY_EXISTS = -705
    TRANSFER_FAIL = -800
    CHECKSUM_MISMATCH = -801
    RPC_FAIL = -900
    RPC_TIMEOUT = -901
    UNAVAILABLE_IN_CURRENT_STATUS = -1010
    NOT_SUPPORTED = -1012
    FILE_NOT_FOUND = -1100
    TENANT_QUOTA_EXCEEDED = -1700
    SESSION_NOT_FOUND = -1800
    SESSION_LIMIT_EXCEEDED = -1802


_log = logging.getLogger("mooncake")


class TaskType(enum.IntEnum):
    """Mooncake's TaskType: what a copy/move task does."""

    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(enum.IntEnum):
    """Mooncake's TaskStatus."""

    PENDING = 0
    PROCESSING = 1
    SUCCESS = 2
    FAILED = 3


class QueryTaskResponse:
    """Mooncake's QueryTaskResponse (what query_task returns with code 0): read-only fields
    id, type, status, created_at_ms_epoch, last_updated_at_ms_epoch, assigned_client,
    message."""

    __slots__ = ("_id", "_type", "_status", "_created", "_updated", "_client", "_message")

    def __init__(
        self,
        id: Any = (0, 0),  # noqa: A002 (Mooncake's field name)
        type: TaskType = TaskType.REPLICA_COPY,  # noqa: A002
        status: TaskStatus = TaskStatus.PENDING,
        created_at_ms_epoch: int = 0,
        last_updated_at_ms_epoch: int = 0,
        assigned_client: str = "",
        message: str = "",
    ) -> None:
        self._id, self._type, self._status = id, TaskType(type), TaskStatus(status)
        self._created, self._updated = int(created_at_ms_epoch), int(last_updated_at_ms_epoch)
        self._client, self._message = str(assigned_client), str(message)

    id = property(lambda self: self._id)
    type = property(lambda self: self._type)
    status = property(lambda self: self._status)
    created_at_ms_epoch = property(lambda self: self._created)
    last_updated_at_ms_epoch = property(lambda self: self._updated)
    assigned_client = property(lambda self: self._client)
    message = property(lambda self: self._message)

    def __repr__(self) -> str:
        return (
            f"QueryTaskResponse(id={self._id}, type={int(self._type)}, status={int(self._status)}, "
            f"created_at={self._created}, last_updated_at={self._updated}, "
            f'assigned_client={self._client}, message="{self._message}")'
        )


class MemoryDescriptor:
    """Mooncake's memory part of a replica descriptor: buffer_descriptor names where the bytes
    are (here the worker's address)."""

    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor: Any = "") -> None:
        self.buffer_descriptor = buffer_descriptor


class DiskDescriptor:
    """Mooncake's disk part of a replica descriptor: file_path and object_size. Replicas here
    are never disk replicas (a worker's NVMe tier is part of its memory replica), so
    get_disk_descriptor() gives an empty one."""

    __slots__ = ("file_path", "object_size")

    def __init__(self, file_path: str = "", object_size: int = 0) -> None:
        self.file_path = file_path
        self.object_size = object_size


class Descriptor:
    """Mooncake's AllocatedBuffer.Descriptor (size, buffer_address, transport_endpoint)."""

    __slots__ = ("size", "buffer_address", "transport_endpoint")

    def __init__(self) -> None:
        self.size = 0
        self.buffer_address = 0
        self.transport_endpoint = ""

    def __repr__(self) -> str:
        return f"<Descriptor size={self.size} buffer_address={self.buffer_address} transport_endpoint={self.transport_endpoint}>"


class _IntField:
    """A type-checked int field of ParallelAxis (pybind11 checks def_readwrite fields on
    assignment): an int, or also None when optional; TypeError otherwise."""

    def __init__(self, optional: bool) -> None:
        self.optional = optional

    def __set_name__(self, owner: Any, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj: Any, v: Any) -> None:
        if not ((v is None and self.optional) or (isinstance(v, int) and not isinstance(v, bool))):
            want = "an int or None" if self.optional else "an int"
            raise TypeError(f"ParallelAxis.{self.name}: incompatible type {type(v).__name__}; want {want}")
        setattr(obj, self.slot, v)


class ParallelAxis:
    """One axis of a tensor's parallel layout (Mooncake's ParallelAxis): kind ("tp", "dp",
    "ep", "pp"), rank, size, split_dim (None when the axis does not split the tensor),
    expert_id, stage_id. Fields are type-checked on assignment, as pybind11's are."""

    __slots__ = ("_kind", "_rank", "_size", "_split_dim", "_expert_id", "_stage_id")

    rank = _IntField(False)
    size = _IntField(False)
    split_dim = _IntField(True)
    expert_id = _IntField(True)
    stage_id = _IntField(True)

    def __init__(self, kind: str = "", rank: int = 0, size: int = 1, split_dim: Optional[int] = None,
                 expert_id: Optional[int] = None, stage_id: Optional[int] = None) -> None:
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    @property
    def kind(self) -> str:
        return self._kind

    @kind.setter
    def kind(self, v: str) -> None:
        if not isinstance(v, str):
            raise TypeError(f"ParallelAxis.kind: incompatible type {type(v).__name__}; want str")
        self._kind = v

    def __repr__(self) -> str:
        return f"ParallelAxis(kind={self._kind!r}, rank={self._rank}, size={self._size}, split_dim={self._split_dim})"


class TensorParallelism:
    """A tensor's parallel layout (Mooncake's TensorParallelism): axes, a list of
    ParallelAxis."""

    __slots__ = ("_axes",)

    def __init__(self, axes: Optional[List[ParallelAxis]] = None) -> None:
        self.axes = [] if axes is None else axes

    @property
    def axes(self) -> List[ParallelAxis]:
        return self._axes

    @axes.setter
    def axes(self, v: Any) -> None:
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise TypeError("TensorParallelism.axes: want a list of ParallelAxis")
        axes = list(v)
        for a in axes:
            if not isinstance(a, ParallelAxis):
                raise TypeError(f"TensorParallelism.axes: {type(a).__name__} is not a ParallelAxis")
        self._axes = axes


_READ_MODES = ("as_stored", "shard", "full")


class ReadTarget:
    """What a *_with_parallelism read returns (Mooncake's ReadTarget): mode "as_stored" (the
    object under the key as written), "shard" (this rank's shard, named by parallelism) or
    "full" (the whole tensor, merged from its shards); parallelism a TensorParallelism or
    None. An unknown mode raises (RuntimeError, as Mooncake's setter does)."""

    __slots__ = ("_mode", "_parallelism")

    def __init__(self, mode: str = "as_stored", parallelism: Optional[TensorParallelism] = None) -> None:
        self.mode = mode
        self.parallelism = parallelism

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, v: str) -> None:
        if not isinstance(v, str):
            raise TypeError(f"ReadTarget.mode: incompatible type {type(v).__name__}; want str")
        m = v.strip().lower()
        if m not in _READ_MODES:
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = m

    @property
    def parallelism(self) -> Optional[TensorParallelism]:
        return self._parallelism

    @parallelism.setter
    def parallelism(self, v: Optional[TensorParallelism]) -> None:
        if v is not None and not isinstance(v, TensorParallelism):
            raise TypeError("ReadTarget.parallelism: want a TensorParallelism or None")
        self._parallelism = v


# --- module functions ---------------------------------------------------------------------


def bind_to_numa_node(node: int) -> None:
    """Binds the calling thread to the CPUs of NUMA node ``node`` (Mooncake's
    bind_to_numa_node; returns None). As Mooncake, a machine without NUMA or an invalid node
    logs a warning and binds nothing. Memory placement follows the kernel's default
    first-touch policy (Mooncake also sets a preferred node through libnuma; the standard
    library has no call for it)."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise TypeError(f"bind_to_numa_node: incompatible type {type(node).__name__}; want an int")
    base = "/sys/devices/system/node"
    if not os.path.isdir(base):
        _log.warning("NUMA is not available on this system; binding skipped")
        return None
    try:
        with open(os.path.join(base, f"node{node}", "cpulist")) as f:
            cpus = _cpulist(f.read())
    except (OSError, ValueError):
        _log.warning("Invalid NUMA node: %d; binding skipped", node)
        return None
    if not cpus:
        _log.warning("NUMA node %d has no CPUs; binding skipped", node)
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as e:
        _log.warning("binding to NUMA node %d failed: %s", node, e)
    return None


def _cpulist(s: str) -> set:
    out = set()
    for part in s.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None)


def get_alloc_func_addr() -> int:
    """The address of a C function ``void *alloc(size_t)`` that allocators such as LMCache's
    call through ctypes (Mooncake's get_alloc_func_addr). Here it is the C library's malloc:
    any host memory works with put_from, get_into and register_buffer over TCP."""
    return int(ctypes.cast(_libc().malloc, ctypes.c_void_p).value or 0)


def get_free_func_addr() -> int:
    """The address of the matching ``void free(void *)``: the C library's free."""
    return int(ctypes.cast(_libc().free, ctypes.c_void_p).value or 0)
