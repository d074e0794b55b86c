"""Mooncake's value types with its binding's rules: ReplicateConfig, its enums, ReplicaDescriptor.

Mooncake's ReplicateConfig is a pybind11 class whose fields are def_readwrite C++ members, so
an assignment of the wrong type raises TypeError at once: -1 or 1 << 64 to an unsigned field, a
float to an integer, a str where a bool is expected, an int where an enum is expected. The
properties below apply the same rules (pybind11's converting casters: an int or anything with
``__index__`` for integers, True/False/None/numbers for booleans, str or bytes for strings,
any sequence but a str for lists), so a program that runs against Mooncake's type checks runs
here, and one that Mooncake stops stops here too.
"""

import enum
from typing import Any, Dict, List

_U64_MAX = (1 << 64) - 1


class SoftPinAction(enum.IntEnum):
    """What a put does to the object's soft pin (Mooncake's SoftPinAction)."""

    PRESERVE = 0  # a new object is not soft-pinned (an upsert cannot keep the old pin here)
    ENABLE = 1  # soft-pin for soft_pin_ttl_ms (default: the masters' default TTL)
    DISABLE = 2  # not soft-pinned


class ObjectDataType(enum.IntEnum):
    """What an object holds (Mooncake's ObjectDataType). Accepted in ReplicateConfig.data_type;
    placement here does not depend on it."""

    UNKNOWN = 0
    KVCACHE = 1


class ReplicaStatus(enum.IntEnum):
    """A replica's state (Mooncake's ReplicaStatus). Replicas reported here are COMPLETE."""

    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


def _type_error(field: str, want: str, v: Any) -> TypeError:
    return TypeError(f"ReplicateConfig.{field}: incompatible type {type(v).__name__} ({v!r}); want {want}")


def _u64(field: str, v: Any) -> int:
    """size_t / uint64_t as pybind11 converts it: an int (or __index__) in [0, 2^64)."""
    if isinstance(v, float) or isinstance(v, (str, bytes)):
        raise _type_error(field, "an int in [0, 2**64)", v)
    idx = getattr(type(v), "__index__", None)
    if idx is None:
        raise _type_error(field, "an int in [0, 2**64)", v)
    n = idx(v)
    if n < 0 or n > _U64_MAX:
        raise _type_error(field, "an int in [0, 2**64)", v)
    return int(n)


def _bool(field: str, v: Any) -> bool:
    """bool as pybind11 converts it: True/False, None (False), or a number."""
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) or type(v).__name__ == "bool_":  # numpy.bool_
        return bool(v)
    raise _type_error(field, "a bool", v)


def _str(field: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8")
    raise _type_error(field, "a str", v)


def _strs(field: str, v: Any) -> List[str]:
    if isinstance(v, (str, bytes, bytearray)) or not hasattr(v, "__iter__"):
        raise _type_error(field, "a list of str", v)
    return [_str(field, x) for x in v]


def _str_lists(field: str, v: Any) -> List[List[str]]:
    if isinstance(v, (str, bytes, bytearray)) or not hasattr(v, "__iter__"):
        raise _type_error(field, "a list of lists of str", v)
    return [_strs(field, x) for x in v]


def _enum(cls: Any, field: str, v: Any) -> Any:
    # pybind11 enums take only their own members; an IntEnum member of ours is also an int,
    # so plain ints are refused explicitly.
    if isinstance(v, cls):
        return v
    raise _type_error(field, cls.__name__, v)


class ReplicateConfig:
    """How a put places and protects an object (Mooncake's ReplicateConfig), every field of
    Mooncake's current binding, type-checked on assignment as pybind11 does (TypeError).

    Fields with an effect here: replica_num (copies on distinct workers, default 1),
    with_hard_pin (never evicted until removed), soft_pin_action and soft_pin_ttl_ms (kept in
    DRAM for that long; with_soft_pin=True is the older spelling of soft_pin_action=ENABLE),
    preferred_segment / preferred_segments (a worker's address as get_hostname() returns it,
    or its id: the first replica goes there), and mooncake-go's own ``persistence``: ""
    (the worker's mode), "cache", "spill" or "durable" (docs/persistence.md).

    Accepted and without effect here (docs/python.md says why): nof_replica_num and
    preferred_nof_segments (no NVMe-oF pool: the NVMe tier belongs to each worker),
    dfs_replica_num (no DFS tier), prefer_alloc_in_same_node (name this host's worker in
    preferred_segment instead), data_type, group_ids.

    kv_sessions (None or one list of KV session ids per key) tags the objects a write stores
    as members of those sessions (_kvtags.py; docs/python.md, "KV sessions").

    As in Mooncake, a put with soft_pin_ttl_ms set while soft_pin_action is not ENABLE returns
    INVALID_PARAMS. Unlike Mooncake's, the constructor also takes the fields as keywords
    (``ReplicateConfig(replica_num=2)``); PRESERVE cannot carry an existing pin across an
    upsert (the new version is not soft-pinned unless asked); a preferred segment that names
    no live worker is ignored, not an error.
    """

    # field: (default factory, converter)
    _FIELDS: Dict[str, Any] = {
        "replica_num": (lambda: 1, _u64),
        "nof_replica_num": (lambda: 0, _u64),
        "dfs_replica_num": (lambda: 0, _u64),
        "with_soft_pin": (lambda: False, _bool),
        "with_hard_pin": (lambda: False, _bool),
        "soft_pin_action": (lambda: SoftPinAction.PRESERVE, lambda f, v: _enum(SoftPinAction, f, v)),
        "soft_pin_ttl_ms": (lambda: None, lambda f, v: None if v is None else _u64(f, v)),
        "preferred_segment": (lambda: "", _str),
        "preferred_segments": (list, _strs),
        "preferred_nof_segments": (list, _strs),
        "prefer_alloc_in_same_node": (lambda: False, _bool),
        "data_type": (lambda: ObjectDataType.UNKNOWN, lambda f, v: _enum(ObjectDataType, f, v)),
        "group_ids": (lambda: None, lambda f, v: None if v is None else _strs(f, v)),
        # Mooncake's KV-session tags: one list of session ids per key (_kvtags.py).
        "kv_sessions": (lambda: None, lambda f, v: None if v is None else _str_lists(f, v)),
        "persistence": (lambda: "", None),  # mooncake-go's; checked by the put (_lib.config)
    }
    __slots__ = tuple("_" + k for k in _FIELDS)

    def __init__(self, **kwargs: Any) -> None:
        for k, (default, _) in self._FIELDS.items():
            object.__setattr__(self, "_" + k, default())
        for k, v in kwargs.items():
            if k not in self._FIELDS:
                raise TypeError(f"ReplicateConfig has no field {k!r}")
            setattr(self, k, v)

    def __getattr__(self, name: str) -> Any:
        if name in ReplicateConfig._FIELDS:
            return object.__getattribute__(self, "_" + name)
        raise AttributeError(f"'ReplicateConfig' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        f = ReplicateConfig._FIELDS.get(name)
        if f is None:
            raise AttributeError(f"'ReplicateConfig' object has no attribute {name!r}")
        conv = f[1]
        object.__setattr__(self, "_" + name, value if conv is None else conv(name, value))

    def __copy__(self) -> "ReplicateConfig":
        c = ReplicateConfig()
        c.__setstate__(self.__getstate__())
        return c

    def __deepcopy__(self, memo: Any) -> "ReplicateConfig":
        return self.__copy__()

    def __getstate__(self) -> Dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in ((k, getattr(self, k)) for k in self._FIELDS)}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, "_" + k, v)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS)
        return f"ReplicateConfig({fields})"

    __str__ = __repr__


class ReplicaDescriptor:
    """One replica of an object (what get_replica_desc returns).

    Mooncake's descriptor has a status and a memory, disk or local-disk descriptor. Here every
    replica is a worker's ("memory": the worker serves it from DRAM or its NVMe tier alike),
    named by segment_name (the worker id) and address (host:port, usable as a
    preferred_segment); is_disk_replica and is_local_disk_replica are False.
    """

    __slots__ = ("status", "segment_name", "address", "type", "object_size")

    def __init__(self, d: Dict[str, Any], object_size: int = 0) -> None:
        self.status: str = str(d.get("status", ""))
        self.segment_name: str = str(d.get("segment_name", ""))
        self.address: str = str(d.get("address", ""))
        self.type: str = str(d.get("type", "memory"))
        self.object_size: int = int(object_size)

    def is_memory_replica(self) -> bool:
        return self.type == "memory"

    def is_disk_replica(self) -> bool:
        return self.type == "disk"

    def is_local_disk_replica(self) -> bool:
        """Mooncake's replica on a client's own SSD (its offload tier). A worker's NVMe tier
        here serves as part of the worker's memory replica, so this is False."""
        return self.type == "local_disk"

    def get_memory_descriptor(self) -> Any:
        """A MemoryDescriptor whose buffer_descriptor is the worker's address."""
        from ._types import MemoryDescriptor

        return MemoryDescriptor(self.address)

    def get_disk_descriptor(self) -> Any:
        """A DiskDescriptor: empty here (no replica is a disk replica), object_size set."""
        from ._types import DiskDescriptor

        return DiskDescriptor("", self.object_size)

    @property
    def buffer_descriptor(self) -> str:
        """Mooncake's memory descriptor names the segment holding the bytes: here the worker."""
        return self.address

    @property
    def file_path(self) -> str:
        return ""

    def __repr__(self) -> str:
        return (
            f"ReplicaDescriptor(segment_name={self.segment_name!r}, address={self.address!r}, "
            f"status={self.status!r}, type={self.type!r})"
        )

