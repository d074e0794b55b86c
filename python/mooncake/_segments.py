"""Mooncake's segment management (mount_segment, allocate_and_mount_segment,
unmount_segment, unmount_and_free_segment), mixed into MooncakeDistributedStore.

Each mounted segment is one more worker inside this process (the library's
cmd/libmooncake_store/segments.go): its own DRAM arena, its own worker id (the segment id
these calls return and take, get_replica_desc's segment_name, usable as preferred_segment)
and its own port on this store's host. Unmounting one is what close() does for setup's
segment: when the call returns the masters place nothing more on it and the objects only it
held are gone (is_exist 0, get b"")."""

import ctypes
from typing import Any, Dict, List, Sequence

from . import _lib

_INVALID = -600
_NOT_SET_UP = -1010
_ID_LEN = 256


def _size_t(v: Any, what: str) -> int:
    # pybind11's size_t: an int (or __index__) in [0, 2^64), else TypeError.
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    v = v.__index__()
    if v < 0 or v >= 1 << 64:
        raise TypeError(f"{what} must be in [0, 2**64), got {v}")
    return v


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {type(v).__name__}")
    return v


def _ids(segment_ids: Any) -> List[str]:
    # pybind11's std::vector<std::string>: any sequence of str but a str itself.
    if isinstance(segment_ids, (str, bytes)) or not isinstance(segment_ids, Sequence):
        raise TypeError("segment_ids must be a list of str")
    return [_str(i, "segment_ids[i]") for i in segment_ids]


class SegmentMethods:
    def mount_segment(self, path: str, size: int, offset: int = 0, protocol: str = "tcp", location: str = "") -> Dict[str, Any]:
        """Mounts size bytes as one more segment of this store: {"ret": 0, "segment_ids":
        [id]}, or {"ret": code, "segment_ids": []}. Mooncake maps [offset, offset+size) of
        the file at path; here that region is checked (the file must hold it: else
        INVALID_PARAMS) and the segment's memory is allocated, as allocate_and_mount_segment
        does: the file's bytes are not used (a worker's arena is its own memfd, shared with
        clients on this host). protocol is accepted (TCP is used); location "" or "cpu"."""
        p, n, off = _str(path, "path"), _size_t(size, "size"), _size_t(offset, "offset")
        _str(protocol, "protocol")
        loc = _str(location, "location")
        if not p:
            _lib.set_error("mount_segment: path is empty")
            return {"ret": _INVALID, "segment_ids": []}
        rc, sid, _ = self._mount(n, p.encode(), off, loc)
        return {"ret": rc, "segment_ids": [sid] if rc == 0 else []}

    def allocate_and_mount_segment(self, size: int, protocol: str = "tcp", location: str = "") -> Dict[str, Any]:
        """Allocates size bytes and mounts them as one more segment of this store:
        {"ret": 0, "segment_ids": [id], "allocated_size": n} (n: size rounded up to the
        arena's pages), or {"ret": code, "segment_ids": [], "allocated_size": 0}."""
        n = _size_t(size, "size")
        _str(protocol, "protocol")
        loc = _str(location, "location")
        rc, sid, got = self._mount(n, None, 0, loc)
        if rc != 0:
            return {"ret": rc, "segment_ids": [], "allocated_size": 0}
        return {"ret": 0, "segment_ids": [sid], "allocated_size": got}

    def unmount_segment(self, segment_ids: Sequence[str], grace_period_seconds: int = 0) -> int:
        """Unmounts segments this store mounted: 0, or a code (SEGMENT_NOT_FOUND for an id
        this store did not mount, with nothing unmounted). When it returns the masters place
        nothing on them and objects held only there are gone; reads already under way may
        finish their sends for up to grace_period_seconds (at most 600)."""
        ids = _ids(segment_ids)
        grace = _size_t(grace_period_seconds, "grace_period_seconds")
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return self._not_set_up_code()  # type: ignore[attr-defined]
        if not ids:
            _lib.set_error("unmount_segment: no segment ids")
            return _INVALID
        arr = (ctypes.c_char_p * len(ids))(*[i.encode() for i in ids])
        rc = self._L.mcpy_unmount_segment(h, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(ids), grace)  # type: ignore[attr-defined]
        if rc != 0:
            _lib.clear_py_error()  # the library's text is the last error
        return rc

    def unmount_and_free_segment(self, segment_ids: Sequence[str], grace_period_seconds: int = 0) -> int:
        """unmount_segment; the segment's memory is freed with it (as every mounted segment's
        memory here is the library's own)."""
        return self.unmount_segment(segment_ids, grace_period_seconds)

    def _mount(self, size: int, path: Any, offset: int, location: str):
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return self._not_set_up_code(), "", 0  # type: ignore[attr-defined]
        out = ctypes.create_string_buffer(_ID_LEN)
        got = ctypes.c_uint64(0)
        rc = self._L.mcpy_mount_segment(h, size, path, offset, location.encode(), out, _ID_LEN, ctypes.byref(got))  # type: ignore[attr-defined]
        if rc != 0:
            _lib.clear_py_error()  # the library's text is the last error
        return rc, out.value.decode(), got.value
