"""The one place that knows libmooncake_store's C API (cmd/libmooncake_store/mooncake_store.h).

Every foreign function's argtypes and restype are declared here, once, when the library is
first loaded; mooncake.store calls them. The library is found at $MOONCAKE_STORE_LIB (a path,
for tests and for a library built by hand) or next to this file (where `pip install ./python`
puts it).

Loading the library starts a Go runtime in this process. It is loaded lazily, by the first
setup(), so `import mooncake.store` before a fork is harmless; a child forked after the load
cannot use it (Go's threads are not copied by fork), see docs/python.md.
"""

import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any, Optional

from . import _buffers

LIB_NAME = "libmooncake_store.so"
ENV_LIB = "MOONCAKE_STORE_LIB"

_c_char_pp = POINTER(c_char_p)
_c_void_pp = POINTER(c_void_p)
_c_size_p = POINTER(c_size_t)
_c_int_p = POINTER(c_int)
_c_int64_p = POINTER(c_int64)
_c_uint64_p = POINTER(c_uint64)


class ReplicateConfigC(ctypes.Structure):
    """struct mooncake_replicate_config."""

    _fields_ = [
        ("replica_num", c_size_t),
        ("with_hard_pin", c_int),
        ("preferred_segments", _c_char_pp),
        ("preferred_segments_count", c_size_t),
        ("soft_pin_action", c_int),
        ("has_soft_pin_ttl", c_int),
        ("soft_pin_ttl_ms", c_uint64),
        ("persistence", c_int),
    ]


_CONFIG_P = POINTER(ReplicateConfigC)

# name: (restype, argtypes). The header is the contract; this table mirrors it, and a Go test
# (internal/repotest TestCtypesMatchHeader) fails when the two disagree.
_STORE = c_void_p  # mooncake_store_t: an opaque integer handle
_FUNCS = {
    "mooncake_store_create": (_STORE, []),
    "mooncake_store_destroy": (None, [_STORE]),
    "mooncake_store_set_tenant_id": (c_int, [_STORE, c_char_p]),
    "mooncake_store_setup": (c_int, [_STORE, c_char_p, c_char_p, c_uint64, c_uint64, c_char_p, c_char_p, c_char_p]),
    "mooncake_store_init_all": (c_int, [_STORE, c_char_p, c_char_p, c_uint64]),
    "mooncake_store_close": (c_int, [_STORE]),
    "mooncake_store_health_check": (c_int, [_STORE]),
    "mooncake_store_put": (c_int, [_STORE, c_char_p, c_void_p, c_size_t, _CONFIG_P]),
    "mooncake_store_put_from": (c_int, [_STORE, c_char_p, c_void_p, c_size_t, _CONFIG_P]),
    "mooncake_store_batch_put_from": (c_int, [_STORE, _c_char_pp, _c_void_pp, _c_size_p, c_size_t, _CONFIG_P, _c_int_p]),
    "mooncake_store_put_parts": (c_int, [_STORE, c_char_p, _c_void_pp, _c_size_p, c_size_t, _CONFIG_P]),
    "mooncake_store_batch_put_from_multi_buffers": (
        c_int,
        [_STORE, _c_char_pp, c_size_t, _c_void_pp, _c_size_p, _c_size_p, _CONFIG_P, _c_int_p],
    ),
    "mooncake_store_upsert": (c_int, [_STORE, c_char_p, c_void_p, c_size_t, _CONFIG_P]),
    "mooncake_store_upsert_from": (c_int, [_STORE, c_char_p, c_void_p, c_size_t, _CONFIG_P]),
    "mooncake_store_batch_upsert_from": (c_int, [_STORE, _c_char_pp, _c_void_pp, _c_size_p, c_size_t, _CONFIG_P, _c_int_p]),
    "mooncake_store_upsert_parts": (c_int, [_STORE, c_char_p, _c_void_pp, _c_size_p, c_size_t, _CONFIG_P]),
    "mooncake_store_get_into": (c_int64, [_STORE, c_char_p, c_void_p, c_size_t]),
    "mooncake_store_batch_get_into": (c_int, [_STORE, _c_char_pp, _c_void_pp, _c_size_p, c_size_t, _c_int64_p]),
    "mooncake_store_batch_get_into_multi_buffers": (
        c_int,
        [_STORE, _c_char_pp, c_size_t, _c_void_pp, _c_size_p, _c_size_p, _c_int64_p],
    ),
    "mooncake_store_get_into_ranges": (c_int, [_STORE, c_size_t, _c_char_pp, _c_void_pp, _c_uint64_p, _c_size_p, _c_int64_p]),
    "mooncake_store_batch_put_session_start": (c_int, [_STORE, _c_char_pp, _c_size_p, c_size_t, _CONFIG_P, _c_int_p]),
    "mooncake_store_batch_put_from_multi_buffer_ranges": (
        c_int,
        [_STORE, _c_char_pp, c_size_t, _c_void_pp, _c_size_p, _c_uint64_p, _c_size_p, _c_int64_p],
    ),
    "mooncake_store_batch_put_session_end": (c_int, [_STORE, _c_char_pp, c_size_t, _c_int_p]),
    "mooncake_store_batch_put_session_revoke": (c_int, [_STORE, _c_char_pp, c_size_t, _c_int_p]),
    "mooncake_store_batch_get_session_start": (c_int, [_STORE, _c_char_pp, c_size_t, _c_int_p]),
    "mooncake_store_batch_get_into_multi_buffer_ranges": (
        c_int,
        [_STORE, _c_char_pp, c_size_t, _c_void_pp, _c_size_p, _c_uint64_p, _c_size_p, _c_int64_p],
    ),
    "mooncake_store_batch_get_session_end": (c_int, [_STORE, _c_char_pp, c_size_t]),
    "mooncake_store_pin_kv_session": (c_int, [_STORE, c_char_p]),
    "mooncake_store_unpin_kv_session": (c_int, [_STORE, c_char_p]),
    "mooncake_store_update_kv_session": (c_int, [_STORE, c_char_p, _c_char_pp, c_size_t]),
    "mooncake_store_close_kv_session": (c_int, [_STORE, c_char_p]),
    "mooncake_store_get_kv_session": (c_int, [_STORE, c_char_p, _c_int_p, ctypes.POINTER(ctypes.c_uint64)]),
    "mooncake_store_list_kv_session_keys": (c_int64, [_STORE, c_char_p, c_char_p, c_size_t, _c_void_pp]),
    "mooncake_store_attach_kv_session": (c_int, [_STORE, c_char_p, _c_char_pp, c_size_t, _c_int_p]),
    "mooncake_store_get_buffer": (c_int64, [_STORE, c_char_p, _c_void_pp]),
    "mooncake_store_batch_get_buffer": (c_int, [_STORE, _c_char_pp, c_size_t, _c_void_pp, _c_int64_p]),
    "mooncake_store_free_buffer": (None, [c_void_p]),
    "mooncake_store_is_exist": (c_int, [_STORE, c_char_p]),
    "mooncake_store_batch_is_exist": (c_int, [_STORE, _c_char_pp, c_size_t, _c_int_p]),
    "mooncake_store_get_size": (c_int64, [_STORE, c_char_p]),
    "mooncake_store_get_replica_desc": (c_int64, [_STORE, c_char_p, _c_void_pp]),
    "mooncake_store_get_hostname": (c_int, [_STORE, ctypes.c_char_p, c_size_t]),
    "mooncake_store_remove": (c_int, [_STORE, c_char_p, c_int]),
    "mooncake_store_remove_by_regex": (c_int64, [_STORE, c_char_p, c_int]),
    "mooncake_store_remove_all": (c_int64, [_STORE, c_int]),
    "mooncake_store_batch_remove": (c_int, [_STORE, _c_char_pp, c_size_t, c_int, _c_int_p]),
    "mooncake_store_register_buffer": (c_int, [_STORE, c_void_p, c_size_t]),
    "mooncake_store_unregister_buffer": (c_int, [_STORE, c_void_p]),
    # Internal exports (not in the header: Mooncake's C API has no segment calls), used by
    # _segments.py.
    "mcpy_mount_segment": (c_int, [_STORE, c_uint64, c_char_p, c_uint64, c_char_p, c_void_p, c_size_t, _c_uint64_p]),
    "mcpy_unmount_segment": (c_int, [_STORE, _c_char_pp, c_size_t, c_uint64]),
    # is_exist and batch_is_exist with ExistOptions(prefetch_to_memory=True) (store.py).
    "mcpy_is_exist_prefetch": (c_int, [_STORE, c_char_p]),
    "mcpy_batch_is_exist_prefetch": (c_int, [_STORE, _c_char_pp, c_size_t, _c_int_p]),
    # Internal exports for copy and move tasks (Mooncake's C API has none), used by _tasks.py.
    "mcpy_create_copy_task": (c_int, [_STORE, c_char_p, _c_char_pp, c_size_t, _c_uint64_p]),
    "mcpy_create_move_task": (c_int, [_STORE, c_char_p, c_char_p, c_char_p, _c_uint64_p]),
    "mcpy_query_task": (c_int, [_STORE, c_uint64, c_uint64, _c_int64_p, c_void_p, c_size_t, c_void_p, c_size_t]),
    # Whether a caller's buffer is GPU memory, for the tensor helpers (_tensor.py).
    "mcpy_is_device_memory": (c_int, [c_void_p, c_size_t]),
    "mooncake_store_last_error": (c_char_p, []),
    "mooncake_store_error_name": (c_char_p, [c_int]),
}

_lib: Optional[ctypes.CDLL] = None
_load_mu = threading.Lock()
_forked_after_load = False
FORK_ERROR = (
    "this process was forked after libmooncake_store was loaded (the Go runtime does not "
    "survive fork): start workers with multiprocessing 'spawn' or 'forkserver', or create "
    "the store in the child"
)


def path() -> str:
    """Where the library is loaded from: $MOONCAKE_STORE_LIB, else beside this package."""
    return os.environ.get(ENV_LIB) or os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_NAME)


def load() -> ctypes.CDLL:
    """Loads the library (once) and declares its functions. Raises OSError with a hint when
    it cannot be found, RuntimeError in a child forked after the parent loaded it."""
    global _lib
    if _forked_after_load:
        raise RuntimeError(FORK_ERROR)
    if _lib is not None:
        return _lib
    with _load_mu:
        if _lib is None:
            p = path()
            try:
                lib = ctypes.CDLL(p)
            except OSError as e:
                raise OSError(
                    f"cannot load {p}: {e}. Install the package with `pip install ./python` from a "
                    f"mooncake-go checkout (it builds the library), or set {ENV_LIB} to a built "
                    "libmooncake_store.so"
                ) from None
            for name, (res, args) in _FUNCS.items():
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _buffers.set_free(lib.mooncake_store_free_buffer)
            _lib = lib
    return _lib


def loaded() -> Optional[ctypes.CDLL]:
    return _lib


def _after_fork_in_child() -> None:
    global _forked_after_load
    if _lib is not None:
        _forked_after_load = True
        # Freeing a buffer would call into the Go runtime, which has no threads here: leak
        # instead (the child's copy of the memory goes with the child).
        _buffers.set_free(None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# --- errors ------------------------------------------------------------------------------------

# Python-side refusals (mismatched batch shapes...) are recorded here, per thread, so
# last_error() explains them like the library's own; a failing library call clears it.
_tls = threading.local()


def set_error(msg: str) -> None:
    _tls.msg = msg


def clear_py_error() -> None:
    _tls.msg = None


def last_error() -> str:
    msg = getattr(_tls, "msg", None)
    if msg:
        return msg
    if _lib is None:
        return ""
    s = _lib.mooncake_store_last_error()
    return s.decode(errors="replace") if s else ""


# --- replicate config --------------------------------------------------------------------------

_PERSISTENCE = {"": 0, "default": 0, "cache": 1, "spill": 2, "durable": 3}


def config(cfg: Any) -> Optional[ReplicateConfigC]:
    """The C struct for a ReplicateConfig (None: NULL, the defaults). Raises TypeError or
    ValueError for a field of the wrong type or a negative number."""
    if cfg is None:
        return None
    c = ReplicateConfigC()
    n = _nonneg(getattr(cfg, "replica_num", 1), "replica_num")
    c.replica_num = n
    c.with_hard_pin = 1 if getattr(cfg, "with_hard_pin", False) else 0
    action = int(getattr(cfg, "soft_pin_action", 0))
    if getattr(cfg, "with_soft_pin", False) and action == 0:
        action = 1  # Mooncake's older boolean: with_soft_pin=True means ENABLE
    c.soft_pin_action = action
    ttl = getattr(cfg, "soft_pin_ttl_ms", None)
    if ttl is not None:
        c.has_soft_pin_ttl = 1
        c.soft_pin_ttl_ms = _nonneg(ttl, "soft_pin_ttl_ms")
    segs = []
    one = getattr(cfg, "preferred_segment", "")
    if one:
        segs.append(one)
    segs.extend(getattr(cfg, "preferred_segments", None) or [])
    if segs:
        for s in segs:
            if not isinstance(s, str):
                raise TypeError(f"preferred_segments entries must be strings, not {type(s).__name__}")
        arr = (c_char_p * len(segs))(*[s.encode() for s in segs])
        # Assigning the cast pointer keeps arr alive in the struct's _objects.
        c.preferred_segments = ctypes.cast(arr, _c_char_pp)
        c.preferred_segments_count = len(segs)
    p = getattr(cfg, "persistence", "")
    if isinstance(p, str):
        if p.lower() not in _PERSISTENCE:
            raise ValueError(f"persistence must be one of {sorted(k for k in _PERSISTENCE if k)} or \"\", got {p!r}")
        c.persistence = _PERSISTENCE[p.lower()]
    else:
        c.persistence = _nonneg(p, "persistence")
    return c


def _nonneg(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"ReplicateConfig.{what} must be an int, not {type(v).__name__}")
    if v < 0:
        raise ValueError(f"ReplicateConfig.{what} must not be negative, got {v}")
    return v
