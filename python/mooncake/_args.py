"""The argument checks and batch plumbing MooncakeDistributedStore and its mixins share:
keys and ints as the C library takes them, and batch calls cut into library-sized pieces.
store.py imports these names, so they stay reachable as mooncake.store._key and the rest."""

import ctypes
from typing import Any, List, Sequence, Union

from . import _lib
from ._types import ErrorCode


Key = Union[str, bytes]


_INVALID = int(ErrorCode.INVALID_PARAMS)
# What a call on a store that is not set up (or was closed) returns: the library's code for it.
_NOT_SET_UP = int(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)


def _key(key: Key) -> bytes:
    if isinstance(key, str):
        k = key.encode("utf-8", "surrogatepass")
    elif isinstance(key, bytes):
        k = key
    else:
        raise TypeError(f"key must be str or bytes, not {type(key).__name__}")
    if b"\0" in k:
        # The C API takes NUL-terminated keys: refuse instead of silently cutting the key.
        raise ValueError("key must not contain NUL characters")
    return k


def _seq(v: Any, what: str) -> Sequence[Any]:
    if isinstance(v, (str, bytes, bytearray)) or not hasattr(v, "__len__"):
        raise TypeError(f"{what} must be a list, not {type(v).__name__}")
    return v


def _keys(keys: Sequence[Key]) -> List[bytes]:
    # The common case (str keys) without a call per key; anything else goes through _key.
    ks = [k.encode("utf-8", "surrogatepass") if type(k) is str else _key(k) for k in _seq(keys, "keys")]
    if b"\0" in b"".join(ks):  # a NUL in the joined keys is a NUL in one of them
        raise ValueError("key must not contain NUL characters")
    return ks


def _int(v: Any, what: str) -> int:
    if isinstance(v, int):
        return v
    idx = getattr(type(v), "__index__", None)  # numpy integers, ctypes-free ints
    if idx is None:
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    return idx(v)


def _ints(vs: Sequence[Any], what: str) -> List[int]:
    if type(vs) is list and all(type(v) is int for v in vs):
        return list(vs)  # already plain ints (the common case): no per-item call
    return [_int(v, what) for v in _seq(vs, what)]


_MAX_ADDR = (1 << 64) - 1


def _addrs(vs: Sequence[Any], what: str) -> List[int]:
    """Pointers as ints. A negative or out-of-range one cannot be passed to C: ValueError."""
    out = _ints(vs, what)
    if out and (min(out) < 0 or max(out) > _MAX_ADDR):
        for v in out:
            if v < 0 or v > _MAX_ADDR:
                raise ValueError(f"{what}: {v} is not an address")
    return out


def _sizes(vs: Sequence[Any], what: str) -> List[int]:
    out = _ints(vs, what)
    if out and min(out) < 0:
        raise ValueError(f"{what}: size {min(out)} is negative")
    return out


# The library refuses larger batches as a whole; bigger ones are cut into calls of this many.
_MAX_BATCH = 4096


def _chunks(n: int):
    for i in range(0, n, _MAX_BATCH):
        yield i, min(n, i + _MAX_BATCH)


def _batched(n: int, restype: Any, call) -> List[int]:
    """Runs a batch call in library-sized pieces: call(i, j, results) handles items [i, j)
    and returns the library's code; a negative code (the arguments as a whole were refused)
    stands for every item of its piece."""
    out: List[int] = []
    for i, j in _chunks(n):
        res = (restype * (j - i))()
        rc = call(i, j, res)
        out.extend([rc] * (j - i) if rc < 0 else res)
    return out


def _cp(ks: List[bytes]) -> Any:
    return (ctypes.c_char_p * len(ks))(*ks)


def _vp(ps: List[int]) -> Any:
    return (ctypes.c_void_p * len(ps))(*ps)


def _sz(ns: List[int]) -> Any:
    return (ctypes.c_size_t * len(ns))(*ns)


def _not_set_up() -> int:
    if _lib._forked_after_load:
        _lib.set_error(_lib.FORK_ERROR)
    else:
        _lib.set_error("the store is not set up: call setup() first (or again after close())")
    return _NOT_SET_UP
