"""Mooncake Store's Python API (``mooncake.store``) over mooncake-go's C library.

A program written for Mooncake runs unchanged::

    from mooncake.store import MooncakeDistributedStore, ReplicateConfig

    store = MooncakeDistributedStore()
    store.setup("localhost", "P2PHANDSHAKE", 512 << 20, 128 << 20, "tcp", "", "127.0.0.1:50051")
    store.put("hello", b"world")
    assert store.get("hello") == b"world"
    store.close()

Conventions are Mooncake's: methods return 0 or a negative Mooncake error code (ErrorCode
below), sizes or a negative code, ``get`` returns ``b""`` on a miss, ``is_exist`` 1/0/-1.
Pointers are plain ints (``ctypes.addressof``, ``numpy.ndarray.ctypes.data``,
``torch.Tensor.data_ptr()``). Bad arguments from Python (wrong types, unknown keywords) raise
TypeError or ValueError, where Mooncake's pybind11 binding raises (ReplicateConfig's fields are
type-checked on assignment); setup returns a code for a bad value, as Mooncake's does. What
the store refuses comes back as a code, and ``last_error()`` gives its text. Every call releases the GIL while the library works, so
threads overlap.

Where this differs from Mooncake, the method's docstring says so; docs/python.md has the
whole list.
"""

import atexit
import ctypes
import json
import os
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _kvtags, _lib
# The shared argument checks live in _args; every name stays importable from here as before.
from ._args import (  # noqa: F401 (some only re-exported)
    _INVALID,
    _MAX_ADDR,
    _MAX_BATCH,
    _NOT_SET_UP,
    Key,
    _addrs,
    _batched,
    _chunks,
    _cp,
    _int,
    _ints,
    _key,
    _keys,
    _not_set_up,
    _seq,
    _sizes,
    _sz,
    _vp,
)
from ._buffers import Borrowed, BufferHandle, make_handle  # noqa: F401 (make_handle only re-exported)
from ._config import ObjectDataType, ReplicaDescriptor, ReplicaStatus, ReplicateConfig, SoftPinAction
from ._hostmem import MooncakeHostMemAllocator
from ._more import MoreMethods
from ._reads import ReadMethods
from ._segments import SegmentMethods
from ._sessions import KvSessionInfo, KvSessionPage, SessionMethods
from ._tasks import TaskMethods
from ._tensor import TensorMethods
from ._types import (
    Descriptor,
    ErrorCode,
    DiskDescriptor,
    MemoryDescriptor,
    ParallelAxis,
    QueryTaskResponse,
    ReadTarget,
    TaskStatus,
    TaskType,
    TensorParallelism,
    bind_to_numa_node,
    get_alloc_func_addr,
    get_free_func_addr,
)
from ._prefetch import ExistOptions, wants_prefetch
from ._setup import SetupError, parse_size
from ._setup import resolve as _resolve_setup

__all__ = [
    "MooncakeDistributedStore",
    "MooncakeHostMemAllocator",
    "ReplicateConfig",
    "ExistOptions",
    "SoftPinAction",
    "ObjectDataType",
    "ReplicaStatus",
    "ErrorCode",
    "BufferHandle",
    "ReplicaDescriptor",
    "MemoryDescriptor",
    "DiskDescriptor",
    "Descriptor",
    "TaskType",
    "TaskStatus",
    "QueryTaskResponse",
    "ParallelAxis",
    "TensorParallelism",
    "ReadTarget",
    "bind_to_numa_node",
    "get_alloc_func_addr",
    "get_free_func_addr",
    "KvSessionInfo",
    "KvSessionPage",
]


def _cstr(s: str) -> bytes:
    b = s.encode()
    if b"\0" in b:
        raise ValueError("strings passed to the library must not contain NUL characters")
    return b


# --- the store ---------------------------------------------------------------------------------

# Stores that are set up, closed at interpreter exit (as Mooncake's ResourceTracker does) so
# an embedded worker unregisters and its objects go.
_live: "weakref.WeakSet[MooncakeDistributedStore]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for s in list(_live):
        try:
            s.close()
        except Exception:
            pass


def _after_fork_in_child() -> None:
    # The child has no Go threads: every store in it is unusable. Drop the handles without
    # calling the library (which would hang), so calls fail with a code and a clear text.
    for s in list(_live):
        s._h = 0
        s._handle = 0
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class MooncakeDistributedStore(ReadMethods, TensorMethods, MoreMethods, SegmentMethods, TaskMethods, SessionMethods):
    """A client of a mooncake-go cluster, with Mooncake's Python API.

    Create it, call setup(...) (or setup_dummy / init_all), use it from any number of
    threads, close() it. After close() the same object may be set up again. Calls on an
    object that is not set up return UNAVAILABLE_IN_CURRENT_STATUS (or b"", None, [], -1 as
    the method's convention says) instead of crashing.
    """

    def __init__(self) -> None:
        self._L: Any = None  # the loaded library
        self._handle = 0  # the library's store handle, made at the first setup, freed in __del__
        self._h = 0  # == _handle while set up, else 0: every call reads it once
        self._mu = threading.Lock()  # serializes setup and close
        # Set up with local_buffer_size=0: put of bytes has nothing to stage from (Mooncake's
        # client copies the value into that buffer first) and returns INVALID_PARAMS.
        self._no_put_buffer = False
        # local_buffer_size as set up (0 for none): mooncake.buffer_pool sizes itself from it.
        self._local_buffer_size = 0
        # setup's enable_ssd_prefetch (default True): False makes is_exist's prefetch a no-op.
        self._ssd_prefetch = True

    # -- lifecycle --

    def setup(
        self,
        local_hostname: Union[str, Dict[str, Any]] = "",
        metadata_server: str = "",
        global_segment_size: Union[int, str] = 16 << 20,
        local_buffer_size: Union[int, str] = 1 << 30,
        protocol: str = "tcp",
        rdma_devices: str = "",
        master_server_addr: str = "",
        engine: Any = None,
        enable_ssd_offload: Any = False,
        ssd_offload_path: str = "",
        tenant_id: str = "default",
        enable_client_http_server: Any = False,
        client_http_port: Any = 9300,
        ipc_socket_path: str = "",
    ) -> int:
        """Connects to the masters; with global_segment_size > 0 also runs a worker in this
        process that contributes that much DRAM to the cluster (as Mooncake does).

        Takes Mooncake's keywords, or one dict with the same names or mooncake.json's
        (device_name, master_server_address). Sizes may be ints or strings such as "16GB"
        (binary units, as Mooncake: GB = 2^30). As in Mooncake a bad value returns a code
        instead of raising: INVALID_PARAMS for a bad size ("50%"), port, boolean or type, or
        an unknown dict key or a bad tenant_id; NOT_SUPPORTED for an ``engine``. last_error()
        says which. tenant_id names the namespace every key of this store is in (keys, listings,
        regex removal, remove_all; puts count against the tenant's quota, TENANT_QUOTA_EXCEEDED
        past it); "default" (or "") is the tenant of stores that name none. An empty master
        address falls back to MOONCAKE_MASTER, then to the file MOONCAKE_CONFIG_PATH names.

        Accepted without effect (docs/python.md says why): metadata_server, a protocol other
        than "tcp" and rdma_devices (one warning each: raft replaces the metadata server, RDMA
        is not in this build), enable_ssd_offload and ssd_offload_path, enable_client_http_server
        and client_http_port, ipc_socket_path. local_buffer_size=0 is taken as Mooncake takes
        it: put and its forms then return INVALID_PARAMS (nothing to stage from). The master
        address may list several masters ("a:50051,b:50051"). Returns 0 or a negative code.
        """
        if isinstance(local_hostname, dict):
            cfg = dict(local_hostname)
            if engine is not None:
                cfg["engine"] = engine
        else:
            cfg = {
                "local_hostname": local_hostname,
                "metadata_server": metadata_server,
                "global_segment_size": global_segment_size,
                "local_buffer_size": local_buffer_size,
                "protocol": protocol,
                "rdma_devices": rdma_devices,
                "master_server_addr": master_server_addr,
                "engine": engine,
                "enable_ssd_offload": enable_ssd_offload,
                "ssd_offload_path": ssd_offload_path,
                "tenant_id": tenant_id,
                "enable_client_http_server": enable_client_http_server,
                "client_http_port": client_http_port,
                "ipc_socket_path": ipc_socket_path,
            }
        if cfg.pop("engine", None) is not None:
            _lib.set_error("setup: engine= (a shared TransferEngine) is not supported by mooncake-go")
            return int(ErrorCode.NOT_SUPPORTED)
        try:
            a, no_buffer = _resolve_setup(cfg, _INVALID, int(ErrorCode.NOT_SUPPORTED))
            args = (
                _cstr(a["local_hostname"]),
                _cstr(a["metadata_server"]),
                a["global_segment_size"],
                a["local_buffer_size"],
                _cstr(a["protocol"]),
                _cstr(a["rdma_devices"]),
                _cstr(a["master_server_addr"]),
            )
        except SetupError as e:
            _lib.set_error(str(e))
            return e.code
        except ValueError as e:  # a NUL in a string
            _lib.set_error(f"setup: {e}")
            return _INVALID
        tenant = _cstr(a["tenant_id"])

        def call(L, h):
            rc = L.mooncake_store_set_tenant_id(h, tenant)
            return rc if rc != 0 else L.mooncake_store_setup(h, *args)

        rc = self._setup(call)
        if rc == 0:
            self._no_put_buffer = no_buffer
            self._local_buffer_size = a["local_buffer_size"]
            self._ssd_prefetch = a["enable_ssd_prefetch"]
        return rc

    def setup_dummy(self, mem_pool_size: int, local_buffer_size: int, server_address: str) -> int:
        """Mooncake's "dummy client" talks to a separate client process that owns the memory.
        mooncake-go has no such process (a worker plays that role), so this sets up a pure
        client (no DRAM contributed) whose masters are server_address; mem_pool_size and
        local_buffer_size are checked and otherwise ignored."""
        parse_size("mem_pool_size", mem_pool_size)
        parse_size("local_buffer_size", local_buffer_size)
        if not isinstance(server_address, str):
            raise TypeError("server_address must be a string")
        addr = _cstr(server_address)
        rc = self._setup(lambda L, h: L.mooncake_store_set_tenant_id(h, b"") or L.mooncake_store_setup(h, b"", b"", 0, 0, b"tcp", b"", addr))
        if rc == 0:
            self._local_buffer_size = parse_size("local_buffer_size", local_buffer_size)
        return rc

    def init_all(self, protocol: str, device_name: str, mount_segment_size: Union[int, str] = 16 << 20) -> int:
        """Mooncake's older one-call setup: masters from MOONCAKE_MASTER or the file
        MOONCAKE_CONFIG_PATH names, mount_segment_size bytes of DRAM contributed."""
        if not isinstance(protocol, str) or not isinstance(device_name, str):
            raise TypeError("protocol and device_name must be strings")
        size = parse_size("mount_segment_size", mount_segment_size)
        p, d = _cstr(protocol), _cstr(device_name)
        return self._setup(lambda L, h: L.mooncake_store_set_tenant_id(h, b"") or L.mooncake_store_init_all(h, p, d, size))

    def _setup(self, call) -> int:
        L = _lib.load()
        with self._mu:
            if self._h:
                _lib.set_error("setup: this store is already set up; close() it first")
                return _INVALID
            if not self._handle:
                self._handle = L.mooncake_store_create() or 0
                if not self._handle:
                    return int(ErrorCode.INTERNAL_ERROR)
            self._L = L
            rc = call(L, self._handle)
            if rc == 0:
                self._no_put_buffer = False  # setup() sets it after this returns
                self._h = self._handle
                _live.add(self)
            else:
                _lib.clear_py_error()
            return rc

    def close(self) -> int:
        """Closes the client; an embedded worker unregisters and its objects go, as in
        Mooncake. Idempotent. The object can be set up again afterwards."""
        with self._mu:
            h, self._h = self._h, 0
            if not h:
                return 0
            _live.discard(self)
            return self._L.mooncake_store_close(h)

    def __del__(self) -> None:
        # Nothing else can be calling: the object is unreachable. In a forked child the
        # handle was dropped (_handle == 0), so the library is not called.
        try:
            h, self._handle, self._h = self._handle, 0, 0
            if h and self._L is not None:
                self._L.mooncake_store_destroy(h)
        except Exception:
            pass

    def health_check(self) -> int:
        """0 when a master answers, 1 when the store is not set up, 2 when no master answered
        (the library's convention), or a negative code."""
        h = self._h
        if not h:
            return 1
        return self._L.mooncake_store_health_check(h)

    def get_hostname(self) -> str:
        """This store's address: the embedded worker's "host:port" when it runs (usable as a
        preferred_segment), else local_hostname; "" when not set up."""
        h = self._h
        if not h:
            return ""
        buf = ctypes.create_string_buffer(1024)
        rc = self._L.mooncake_store_get_hostname(h, buf, len(buf))
        return buf.value.decode(errors="replace") if rc == 0 else ""

    def last_error(self) -> str:
        """The text of the last error reported to this thread (mooncake-go's addition;
        Mooncake writes it to its log). Like errno, a success does not clear it."""
        if _lib._forked_after_load:
            return _lib.FORK_ERROR
        return _lib.last_error()

    # -- put --

    def put(self, key: Key, value: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Stores value (any bytes-like object, read in place). As in Mooncake, a put of a
        key that already exists returns 0 and keeps the stored value (upsert replaces it); an
        empty value is INVALID_PARAMS. Returns 0 or a negative code."""
        return self._put_parts(key, (value,), config, False)

    def upsert(self, key: Key, value: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Inserts, or replaces an existing object (readers see the old or the new value
        whole, never a mix). Returns 0 or a negative code."""
        return self._put_parts(key, (value,), config, True)

    def put_parts(self, key: Key, *parts: Any, config: Optional[ReplicateConfig] = None) -> int:
        """Stores the concatenation of parts (bytes-like, read in place) as one object."""
        return self._put_parts(key, parts, config, False)

    def upsert_parts(self, key: Key, *parts: Any, config: Optional[ReplicateConfig] = None) -> int:
        """upsert of the concatenation of parts."""
        return self._put_parts(key, parts, config, True)

    def _put_parts(self, key: Key, parts: Sequence[Any], config: Optional[ReplicateConfig], upsert: bool) -> int:
        tags = _kvtags.check(config, 1)
        if tags is _kvtags.BAD:
            return _INVALID
        rc = self._put_parts_untagged(key, parts, config, upsert)
        return _kvtags.attach(self, [_key(key)], tags, [rc])[0] if tags else rc

    def _put_parts_untagged(self, key: Key, parts: Sequence[Any], config: Optional[ReplicateConfig], upsert: bool) -> int:
        k = _key(key)
        c = _lib.config(config)
        h = self._h
        if not h:
            return _not_set_up()
        if self._no_put_buffer:
            return _no_buffer()
        L = self._L
        if len(parts) == 1 and type(parts[0]) is bytes:
            # Fast path for the common case: ctypes passes a bytes object's own buffer (the
            # object is alive for the call, and bytes are immutable).
            v = parts[0]
            return (L.mooncake_store_upsert if upsert else L.mooncake_store_put)(h, k, v, len(v), c)
        with Borrowed(list(parts)) as b:
            n = len(b.addrs)
            if n == 1:
                fn = L.mooncake_store_upsert if upsert else L.mooncake_store_put
                return fn(h, k, b.addrs[0], b.lens[0], c)
            fn = L.mooncake_store_upsert_parts if upsert else L.mooncake_store_put_parts
            return fn(h, k, _vp(b.addrs), _sz(b.lens), n, c)

    def put_batch(self, keys: Sequence[Key], values: Sequence[Any], config: Optional[ReplicateConfig] = None) -> int:
        """Stores each value under its key in one batch. Returns 0, or the first negative
        code (Mooncake's convention; the keys whose put succeeded are stored)."""
        return self._put_batch(keys, values, config, False)

    def upsert_batch(self, keys: Sequence[Key], values: Sequence[Any], config: Optional[ReplicateConfig] = None) -> int:
        """upsert of each value under its key in one batch; 0 or the first negative code."""
        return self._put_batch(keys, values, config, True)

    def _put_batch(self, keys: Sequence[Key], values: Sequence[Any], config: Optional[ReplicateConfig], upsert: bool) -> int:
        ks = _keys(keys)
        if isinstance(values, (bytes, bytearray, memoryview, str)):
            raise TypeError("values must be a list of bytes-like objects")
        values = list(values)
        if len(ks) != len(values):
            _lib.set_error(f"put_batch: {len(ks)} keys but {len(values)} values")
            return _INVALID
        if self._h and self._no_put_buffer:
            return _no_buffer()
        with Borrowed(values) as b:
            rs = self._batch_put(ks, b.addrs, b.lens, config, upsert)
        for r in rs:
            if r != 0:
                return r
        return 0

    def put_from(self, key: Key, buffer_ptr: int, size: int, config: Optional[ReplicateConfig] = None) -> int:
        """Stores size bytes read from buffer_ptr (no copy on this side). Unlike Mooncake the
        buffer need not be registered. Returns 0 or a negative code."""
        return self._put_from(key, buffer_ptr, size, config, False)

    def upsert_from(self, key: Key, buffer_ptr: int, size: int, config: Optional[ReplicateConfig] = None) -> int:
        """upsert from a buffer; 0 or a negative code."""
        return self._put_from(key, buffer_ptr, size, config, True)

    def _put_from(self, key: Key, buffer_ptr: int, size: int, config: Optional[ReplicateConfig], upsert: bool) -> int:
        tags = _kvtags.check(config, 1)
        if tags is _kvtags.BAD:
            return _INVALID
        rc = self._put_from_untagged(key, buffer_ptr, size, config, upsert)
        return _kvtags.attach(self, [_key(key)], tags, [rc])[0] if tags else rc

    def _put_from_untagged(self, key: Key, buffer_ptr: int, size: int, config: Optional[ReplicateConfig], upsert: bool) -> int:
        k = _key(key)
        p, n = _int(buffer_ptr, "buffer_ptr"), _int(size, "size")
        c = _lib.config(config)
        h = self._h
        if not h:
            return _not_set_up()
        if p < 0 or n < 0:
            _lib.set_error("put_from: buffer_ptr and size must not be negative")
            return _INVALID
        fn = self._L.mooncake_store_upsert_from if upsert else self._L.mooncake_store_put_from
        return fn(h, k, p, n, c)

    def batch_put_from(
        self, keys: Sequence[Key], buffer_ptrs: Sequence[int], sizes: Sequence[int], config: Optional[ReplicateConfig] = None
    ) -> List[int]:
        """Stores each buffer under its key; one code per key. Mismatched list lengths give
        INVALID_PARAMS for every key."""
        return self._batch_put_from(keys, buffer_ptrs, sizes, config, False)

    def batch_upsert_from(
        self, keys: Sequence[Key], buffer_ptrs: Sequence[int], sizes: Sequence[int], config: Optional[ReplicateConfig] = None
    ) -> List[int]:
        """upsert form of batch_put_from; one code per key."""
        return self._batch_put_from(keys, buffer_ptrs, sizes, config, True)

    def _batch_put_from(self, keys, buffer_ptrs, sizes, config, upsert) -> List[int]:
        ks = _keys(keys)
        ps, ns = _addrs(buffer_ptrs, "buffer_ptrs"), _sizes(sizes, "sizes")
        if not (len(ks) == len(ps) == len(ns)):
            _lib.set_error(f"batch_put_from: {len(ks)} keys, {len(ps)} buffer_ptrs, {len(ns)} sizes")
            return [_INVALID] * len(ks)
        return self._batch_put(ks, ps, ns, config, upsert)

    def _batch_put(self, ks: List[bytes], ps: List[int], ns: List[int], config, upsert: bool) -> List[int]:
        tags = _kvtags.check(config, len(ks))
        if tags is _kvtags.BAD:
            return _kvtags.invalid(len(ks))
        return _kvtags.attach(self, ks, tags, self._batch_put_untagged(ks, ps, ns, config, upsert))

    def _batch_put_untagged(self, ks: List[bytes], ps: List[int], ns: List[int], config, upsert: bool) -> List[int]:
        c = _lib.config(config)
        h = self._h
        n = len(ks)
        if not h:
            return [_not_set_up()] * n
        fn = self._L.mooncake_store_batch_upsert_from if upsert else self._L.mooncake_store_batch_put_from
        return _batched(n, ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), _vp(ps[i:j]), _sz(ns[i:j]), j - i, c, res))

    def batch_put_from_multi_buffers(
        self,
        keys: Sequence[Key],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        config: Optional[ReplicateConfig] = None,
    ) -> List[int]:
        """Stores, under keys[i], the concatenation of the buffers all_buffer_ptrs[i] (sizes
        all_sizes[i]); one code per key. Mismatched shapes give INVALID_PARAMS for every key."""
        c = _lib.config(config)
        ks = _keys(keys)
        tags = _kvtags.check(config, len(ks))
        if tags is _kvtags.BAD:
            return _kvtags.invalid(len(ks))
        rs = self._multi("mooncake_store_batch_put_from_multi_buffers", ctypes.c_int, ks, all_buffer_ptrs, all_sizes, c)
        return _kvtags.attach(self, ks, tags, rs)

    def _multi(self, name: str, restype: Any, keys, all_buffer_ptrs, all_sizes, *config: Any) -> List[int]:
        """The two multi-buffer batch calls: flattened (keys, buffers, sizes, part counts),
        then config for the put, then the results array."""
        ks = _keys(keys)
        n = len(ks)
        flat = _flatten_multi(n, all_buffer_ptrs, all_sizes)
        if flat is None:
            return [_INVALID] * n
        h = self._h
        if not h:
            return [_not_set_up()] * n
        counts, ps, ns, at = flat
        fn = getattr(self._L, name)
        return _batched(
            n,
            restype,
            lambda i, j, res: fn(h, _cp(ks[i:j]), j - i, _vp(ps[at[i] : at[j]]), _sz(ns[at[i] : at[j]]), _sz(counts[i:j]), *config, res),
        )

    # -- get: the read calls are in _reads.py (ReadMethods) --

    # -- buffers --

    def register_buffer(self, buffer_ptr: int, size: int) -> int:
        """Registers memory for the zero-copy calls; 0 or a negative code. Over TCP nothing
        needs pinning, so this only records the range: get_into_ranges refuses destinations
        outside every registered buffer (as Mooncake does); put_from and get_into accept any
        memory."""
        p, n = _int(buffer_ptr, "buffer_ptr"), _int(size, "size")
        h = self._h
        if not h:
            return _not_set_up()
        if p <= 0 or n <= 0:
            _lib.set_error("register_buffer: buffer_ptr and size must be positive")
            return _INVALID
        return self._L.mooncake_store_register_buffer(h, p, n)

    def unregister_buffer(self, buffer_ptr: int) -> int:
        """Forgets the buffer registered at buffer_ptr; 0, or INVALID_PARAMS when none is."""
        p = _int(buffer_ptr, "buffer_ptr")
        h = self._h
        if not h:
            return _not_set_up()
        if p <= 0:
            _lib.set_error("unregister_buffer: buffer_ptr must be positive")
            return _INVALID
        return self._L.mooncake_store_unregister_buffer(h, p)

    # -- queries --

    def is_exist(
        self, key: Key, options: Optional[ExistOptions] = None, *, prefetch_to_memory: Optional[bool] = None
    ) -> int:
        """1 if the object exists, 0 if not, -1 on an error. With ExistOptions or the keyword
        prefetch_to_memory=True (and setup's enable_ssd_prefetch not false) the worker holding
        the object promotes it from NVMe to DRAM in the background (docs/python.md)."""
        k = _key(key)
        prefetch = wants_prefetch(options, prefetch_to_memory) and self._ssd_prefetch
        h = self._h
        if not h:
            _not_set_up()
            return -1
        fn = self._L.mcpy_is_exist_prefetch if prefetch else self._L.mooncake_store_is_exist
        r = fn(h, k)
        return r if r in (0, 1) else -1

    def isExist(  # noqa: N802 (Mooncake's spelling; programs call it)
        self, key: Key, options: Optional[ExistOptions] = None, *, prefetch_to_memory: Optional[bool] = None
    ) -> int:
        """is_exist under Mooncake's other name."""
        return self.is_exist(key, options, prefetch_to_memory=prefetch_to_memory)

    def batch_is_exist(
        self, keys: Sequence[Key], options: Optional[ExistOptions] = None, *, prefetch_to_memory: Optional[bool] = None
    ) -> List[int]:
        """is_exist for each key: 1, 0 or -1 (options as is_exist's)."""
        ks = _keys(keys)
        prefetch = wants_prefetch(options, prefetch_to_memory) and self._ssd_prefetch
        n = len(ks)
        h = self._h
        if not h:
            _not_set_up()
            return [-1] * n
        fn = self._L.mcpy_batch_is_exist_prefetch if prefetch else self._L.mooncake_store_batch_is_exist
        res = _batched(n, ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), j - i, res))
        return [r if r in (0, 1) else -1 for r in res]

    def get_size(self, key: Key) -> int:
        """The object's size in bytes, or a negative code (OBJECT_NOT_FOUND on a miss)."""
        k = _key(key)
        h = self._h
        if not h:
            return _not_set_up()
        return self._L.mooncake_store_get_size(h, k)

    def get_replica_desc(self, key: Key) -> List[ReplicaDescriptor]:
        """The object's replicas ([] on a miss or an error); see ReplicaDescriptor."""
        k = _key(key)
        h = self._h
        if not h:
            _not_set_up()
            return []
        L = self._L
        out = ctypes.c_void_p()
        n = L.mooncake_store_get_replica_desc(h, k, ctypes.byref(out))
        if n < 0 or not out.value:
            return []
        try:
            doc = json.loads(ctypes.string_at(out.value, n))
        finally:
            L.mooncake_store_free_buffer(out)
        return [ReplicaDescriptor(r, doc.get("size", 0)) for r in doc.get("replicas") or []]

    def batch_get_replica_desc(self, keys: Sequence[Key]) -> Dict[Key, List[ReplicaDescriptor]]:
        """get_replica_desc for several keys: {key: [descriptors]} (a miss maps to [])."""
        return {k: self.get_replica_desc(k) for k in _seq(keys, "keys")}

    # -- remove --

    def remove(self, key: Key, force: bool = False) -> int:
        """Removes the object; 0 or a negative code (OBJECT_NOT_FOUND on a miss). force is
        accepted and changes nothing: objects here have no leases, and a reader already
        reading finishes before the memory is freed."""
        k = _key(key)
        h = self._h
        if not h:
            return _not_set_up()
        return self._L.mooncake_store_remove(h, k, 1 if force else 0)

    def remove_by_regex(self, regex_pattern: str, force: bool = False) -> int:
        """Removes every object of this store's tenant whose key matches (RE2 syntax, as Go's
        regexp; unanchored unless the pattern says ^...$). Returns the number removed or a
        negative code."""
        if not isinstance(regex_pattern, str):
            raise TypeError("regex_pattern must be a string")
        pat = _cstr(regex_pattern)
        h = self._h
        if not h:
            return _not_set_up()
        return self._L.mooncake_store_remove_by_regex(h, pat, 1 if force else 0)

    def remove_all(self, force: bool = False) -> int:
        """Removes every object of this store's tenant; the number removed or a negative code."""
        h = self._h
        if not h:
            return _not_set_up()
        return self._L.mooncake_store_remove_all(h, 1 if force else 0)

    def batch_remove(self, keys: Sequence[Key], force: bool = False) -> List[int]:
        """remove for each key in one batch: one code per key."""
        ks = _keys(keys)
        n = len(ks)
        h = self._h
        if not h:
            return [_not_set_up()] * n
        fn, f = self._L.mooncake_store_batch_remove, 1 if force else 0
        return _batched(n, ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), j - i, f, res))


def _no_buffer() -> int:
    _lib.set_error(
        "put: local_buffer_size is 0, so there is no buffer to stage the value in (Mooncake's limit, kept "
        "here): set up with a local_buffer_size, or use put_from / batch_put_from"
    )
    return _INVALID


def _flatten_multi(n: int, all_ptrs: Sequence[Sequence[int]], all_sizes: Sequence[Sequence[int]]):
    """(part counts, flat pointers, flat sizes, starts) for the multi-buffer calls, where
    key i's parts are flat[starts[i]:starts[i+1]]; or None (and an error recorded) when the
    shapes do not match."""
    all_ptrs, all_sizes = _seq(all_ptrs, "all_buffer_ptrs"), _seq(all_sizes, "all_sizes")
    if len(all_ptrs) != n or len(all_sizes) != n:
        _lib.set_error(f"{n} keys but {len(all_ptrs)} buffer lists and {len(all_sizes)} size lists")
        return None
    counts: List[int] = []
    ps: List[int] = []
    ns: List[int] = []
    starts = [0]
    for i in range(n):
        p_i, s_i = _addrs(all_ptrs[i], "all_buffer_ptrs[i]"), _sizes(all_sizes[i], "all_sizes[i]")
        if len(p_i) != len(s_i):
            _lib.set_error(f"key {i}: {len(p_i)} buffers but {len(s_i)} sizes")
            return None
        counts.append(len(p_i))
        ps.extend(p_i)
        ns.extend(s_i)
        starts.append(len(ps))
    return counts, ps, ns, starts
