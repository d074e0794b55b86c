"""MooncakeHostMemAllocator: host memory for buffers, with Mooncake's Python API.

Mooncake's allocator hands out shared-memory mappings (its ShmHelper) that a separate client
process can map too. Here each alloc is its own anonymous shared mapping (mmap(MAP_SHARED |
MAP_ANONYMOUS) through the C library, so the memory is real, page-aligned and zeroed, and any
call of the store (put_from, get_into, register_buffer) can use it. There is no separate client
process to share it with; a forked child inherits the mappings as with Mooncake.
"""

import ctypes
import ctypes.util
import mmap
import threading
from typing import Any, Dict, Optional

_MAP_FAILED = ctypes.c_void_p(-1).value
_U64_MAX = (1 << 64) - 1

_libc: Optional[ctypes.CDLL] = None
_libc_mu = threading.Lock()

# Every allocator shares one table, as Mooncake's share one ShmHelper: memory one allocator
# gave may be freed through another, and it outlives the allocator object (freed by free(),
# else at process exit), so a pointer kept after the allocator is dropped stays valid.
_maps_mu = threading.Lock()
_maps: Dict[int, int] = {}  # address -> length; protected by _maps_mu


def _c() -> ctypes.CDLL:
    global _libc
    with _libc_mu:
        if _libc is None:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            lib.mmap.restype = ctypes.c_void_p
            lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
            lib.munmap.restype = ctypes.c_int
            lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            _libc = lib
    return _libc


def _u64(what: str, v: Any) -> int:
    # pybind11's size_t / uintptr_t conversion: an int in [0, 2^64), else TypeError.
    if isinstance(v, (bool, float, str, bytes)) or getattr(type(v), "__index__", None) is None:
        raise TypeError(f"MooncakeHostMemAllocator.{what}: incompatible type {type(v).__name__}; want an int")
    n = type(v).__index__(v)
    if n < 0 or n > _U64_MAX:
        raise TypeError(f"MooncakeHostMemAllocator.{what}: {n} is not in [0, 2**64)")
    return int(n)


class MooncakeHostMemAllocator:
    """alloc(size) returns the address of size bytes of zeroed host memory (0 when it cannot
    be had, or for size 0), free(ptr) releases it and returns 0 (-1 for an address alloc did
    not return, or one freed already). Memory not freed lives until the process exits, as
    with Mooncake's. Thread-safe."""

    def alloc(self, size: int) -> int:
        n = _u64("alloc", size)
        if n == 0:
            return 0
        c = _c()
        p = c.mmap(None, n, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS, -1, 0)
        if p is None or p == _MAP_FAILED:
            return 0
        with _maps_mu:
            _maps[p] = n
        return p

    def free(self, ptr: int) -> int:
        p = _u64("free", ptr)
        with _maps_mu:
            n = _maps.pop(p, None)
        if n is None:
            return -1
        return 0 if _c().munmap(p, n) == 0 else -1
