"""mooncake.buffer_pool: Mooncake's BufferPool, a pool of registered host buffers for the
zero-copy calls (put_from, get_into, batch_get_into, ...)::

    from mooncake.buffer_pool import BufferPool
    pool = BufferPool(store)                  # store: a set-up MooncakeDistributedStore
    with pool.acquire(1 << 20) as lease:      # lease.ptr, lease.size, lease.buffer
        n = store.get_into(key, lease.ptr, lease.size)
        data = bytes(lease.buffer[:n])

Regions are host memory (MooncakeHostMemAllocator: anonymous shared mappings, page-aligned)
registered with the store; a released region is reused by the next acquire that fits. The
pool holds at most max_bytes (default: twice the store's local_buffer_size); an acquire past
that waits (block_on_exhaustion, timeout) or raises. Errors are RuntimeError, as Mooncake's.
Differences: Mooncake carves regions from the client's local buffer first and aligns
overflow regions to ``alignment``; here every region is its own mapping, aligned to pages.
Thread-safe.
"""

import ctypes
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from ._hostmem import MooncakeHostMemAllocator

__all__ = ["BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease"]


class BufferLease:
    """One acquired buffer: ptr (int), size (the bytes asked for), buffer (a writable
    memoryview of size bytes). release() (or leaving a with block) gives it back; release
    with a memoryview from .buffer still alive raises RuntimeError, as Mooncake's."""

    def __init__(self, pool: "BufferPool", ptr: int, cap: int, size: int) -> None:
        self._pool: Optional[BufferPool] = pool
        self._ptr, self._cap, self._size = ptr, cap, size
        self._arr = (ctypes.c_ubyte * size).from_address(ptr) if size else bytearray()

    @property
    def ptr(self) -> int:
        if self._pool is None:
            raise RuntimeError("buffer lease is closed")
        return self._ptr

    @property
    def size(self) -> int:
        return self._size

    @property
    def buffer(self) -> memoryview:
        if self._pool is None:
            raise RuntimeError("buffer lease is closed")
        return memoryview(self._arr).cast("B")

    def release(self) -> None:
        if self._pool is None:
            return
        # Each memoryview of the array holds one reference to it: more than this object's
        # own (and getrefcount's argument) means a view is still alive.
        if sys.getrefcount(self._arr) > 2:
            raise RuntimeError("cannot release buffer while exported views exist")
        pool, self._pool = self._pool, None
        pool._give_back(self._ptr)

    def __enter__(self) -> "BufferLease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class BufferPool:
    """Mooncake's BufferPool(store, max_bytes=0, min_size_class=64 KiB, max_size_class=None,
    alignment=8 MiB, block_on_exhaustion=True, default_timeout=None, max_regions=None,
    prewarm_size=None, prewarm_count=0)."""

    def __init__(self, store: Any, max_bytes: int = 0, min_size_class: int = 64 * 1024,
                 max_size_class: Optional[int] = None, alignment: int = 8 * 1024 * 1024,
                 block_on_exhaustion: bool = True, default_timeout: Optional[float] = None,
                 max_regions: Optional[int] = None, prewarm_size: Optional[int] = None,
                 prewarm_count: int = 0) -> None:
        if store is None or not getattr(store, "_h", 0):
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        if min_size_class <= 0 or alignment <= 0:
            raise RuntimeError("min_size_class and alignment must be positive")
        if alignment < ctypes.sizeof(ctypes.c_void_p) or alignment & (alignment - 1):
            raise RuntimeError("alignment must be a power of two and at least sizeof(void*)")
        local = int(getattr(store, "_local_buffer_size", 0) or 0)
        if local <= 0:
            raise RuntimeError("BufferPool requires a store configured with a local buffer")
        self._store = store
        self._max_bytes = 2 * local if max_bytes == 0 else max(max_bytes, local)
        self._min_class = min_size_class
        self._max_class = self._max_bytes if max_size_class is None else int(max_size_class)
        self._block = bool(block_on_exhaustion)
        self._timeout = None if default_timeout is None else float(default_timeout)
        self._max_regions = None if max_regions is None else int(max_regions)
        self._alloc = MooncakeHostMemAllocator()
        self._cv = threading.Condition()
        # Guarded by _cv: every region (ptr -> capacity), the free ones, the total.
        self._regions: Dict[int, int] = {}
        self._free: List[int] = []
        self._total = 0
        self._closed = False
        if prewarm_size is not None and prewarm_count > 0:
            self.prewarm(prewarm_size, prewarm_count)

    def _class(self, size: int) -> int:
        n = max(size, 1)
        if n > self._max_class:
            return n
        c = self._min_class
        while c < n:
            c <<= 1
        return min(c, self._max_class) if c > self._max_class else c

    def acquire(self, size: int, block: Optional[bool] = None, timeout: Optional[float] = None) -> BufferLease:
        """A lease of at least size bytes; waits for a release when the pool is full (unless
        block=False, then RuntimeError "buffer pool is exhausted"); timeout in seconds."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeError("size must be a non-negative int")
        wait = self._block if block is None else bool(block)
        t = self._timeout if timeout is None else float(timeout)
        if t is not None and t < 0:
            raise RuntimeError("timeout must be non-negative")
        cls = self._class(size)
        if cls > self._max_bytes:
            raise RuntimeError("requested buffer size exceeds pool capacity")
        deadline = None if t is None else time.monotonic() + t
        with self._cv:
            while True:
                if self._closed:
                    raise RuntimeError("buffer pool is closed")
                fit = [p for p in self._free if self._regions[p] >= cls]
                if fit:
                    p = min(fit, key=lambda q: self._regions[q])
                    self._free.remove(p)
                    return BufferLease(self, p, self._regions[p], size)
                if self._room(cls):
                    p = self._new_region(cls)
                    return BufferLease(self, p, cls, size)
                if self._free:  # room only if an idle region of another size goes
                    q = self._free.pop()
                    self._drop_region(q)
                    continue
                if not wait:
                    raise RuntimeError("buffer pool is exhausted")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RuntimeError("timed out waiting for buffer")
                self._cv.wait(left)

    buffer = acquire  # Mooncake's other name

    def _room(self, cls: int) -> bool:
        # REQUIRES: self._cv
        if self._total + cls > self._max_bytes:
            return False
        return self._max_regions is None or len(self._regions) < self._max_regions

    def _new_region(self, cls: int) -> int:
        # REQUIRES: self._cv
        p = self._alloc.alloc(cls)
        if not p:
            raise RuntimeError(f"cannot allocate {cls} bytes of host memory")
        if self._store.register_buffer(p, cls) != 0:
            self._alloc.free(p)
            raise RuntimeError("buffer registration failed")
        self._regions[p] = cls
        self._total += cls
        return p

    def _drop_region(self, p: int) -> None:
        # REQUIRES: self._cv
        cls = self._regions.pop(p)
        self._total -= cls
        self._store.unregister_buffer(p)
        self._alloc.free(p)

    def _give_back(self, p: int) -> None:
        with self._cv:
            if self._closed:
                return
            self._free.append(p)
            self._cv.notify_all()

    def prewarm(self, size: int, count: int) -> None:
        """Accepted; regions are made on demand (Mooncake's prewarm also does nothing)."""

    def close(self) -> None:
        """Frees every region; RuntimeError while a lease is still held."""
        with self._cv:
            if self._closed:
                return
            if len(self._free) != len(self._regions):
                raise RuntimeError("cannot close buffer pool with active leases")
            for p in list(self._regions):
                self._drop_region(p)
            self._free.clear()
            self._closed = True
            self._cv.notify_all()


RegisteredBufferPool = BufferPool
RegisteredBufferLease = BufferLease
