"""Mooncake's copy and move tasks (create_copy_task, create_move_task, query_task), mixed
into MooncakeDistributedStore.

The masters' leader queues each task's copies on the queue repair and drain use (one copy of
a key at a time, under the repair bounds) and answers at once with the task id, Mooncake's
UUID as a tuple of two ints. A copy adds a replica on each target segment; a move copies to
the target, then drops the source's replica. Segments are named by worker id (what
get_replica_desc's segment_name shows) or by address (what get_hostname answers). Task state
is the leader's: after a failover query_task answers OBJECT_NOT_FOUND (docs/python.md)."""

import ctypes
from typing import Any, List, Optional, Sequence, Tuple

from . import _lib
from ._types import QueryTaskResponse, TaskStatus, TaskType

_NAME_LEN = 1025  # a segment name is at most 1024 bytes (the wire's address bound)
_MESSAGE_LEN = 4096

UUID = Tuple[int, int]


def _name(v: Any, what: str) -> bytes:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {type(v).__name__}")
    return v.encode()


def _uuid(task_id: Any) -> UUID:
    # pybind11's std::pair<uint64_t, uint64_t>: a sequence of two ints in [0, 2^64).
    if isinstance(task_id, (str, bytes)) or not isinstance(task_id, Sequence) or len(task_id) != 2:
        raise TypeError("task_id must be a tuple of two ints (the UUID create_copy_task returned)")
    out = []
    for v in task_id:
        if isinstance(v, bool) or not hasattr(v, "__index__") or not 0 <= v.__index__() < 1 << 64:
            raise TypeError("task_id must be a tuple of two ints in [0, 2**64)")
        out.append(v.__index__())
    return out[0], out[1]


class TaskMethods:
    def create_copy_task(self, key: str, targets: Sequence[str]) -> Tuple[UUID, int]:
        """Copies key's object to each target segment (one more replica on each), in the
        background: ((hi, lo), 0) at once, or ((0, 0), code): OBJECT_NOT_FOUND (no such key),
        SEGMENT_NOT_FOUND (a segment unknown, or a target not alive or draining),
        OBJECT_ALREADY_EXISTS (a target holds it), INVALID_PARAMS (no target, one twice)."""
        k = _name(key, "key")
        if isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence):
            raise TypeError("targets must be a list of str")
        names: List[bytes] = [_name(t, "targets[i]") for t in targets]
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return (0, 0), self._not_set_up_code()  # type: ignore[attr-defined]
        arr = (ctypes.c_char_p * max(1, len(names)))(*names)
        out = (ctypes.c_uint64 * 2)()
        rc = self._L.mcpy_create_copy_task(h, k, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(names), out)  # type: ignore[attr-defined]
        return self._task_id(rc, out)

    def create_move_task(self, key: str, source: str, target: str) -> Tuple[UUID, int]:
        """Moves key's replica on segment source to segment target (a copy, then the source's
        replica is dropped): ((hi, lo), 0) at once, or ((0, 0), code) as create_copy_task's;
        OBJECT_NOT_FOUND also when source holds no replica of key."""
        k, src, dst = _name(key, "key"), _name(source, "source"), _name(target, "target")
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return (0, 0), self._not_set_up_code()  # type: ignore[attr-defined]
        out = (ctypes.c_uint64 * 2)()
        rc = self._L.mcpy_create_move_task(h, k, src, dst, out)  # type: ignore[attr-defined]
        return self._task_id(rc, out)

    def query_task(self, task_id: UUID) -> Tuple[Optional[QueryTaskResponse], int]:
        """(QueryTaskResponse, 0): the task's type, status (PENDING, PROCESSING, SUCCESS,
        FAILED), creation and last update (ms since the epoch), the worker that copies
        (assigned_client) and a failure's reason (message); or (None, code):
        OBJECT_NOT_FOUND for a task the leader does not know."""
        hi, lo = _uuid(task_id)
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return None, self._not_set_up_code()  # type: ignore[attr-defined]
        vals = (ctypes.c_int64 * 4)()
        client = ctypes.create_string_buffer(_NAME_LEN)
        msg = ctypes.create_string_buffer(_MESSAGE_LEN)
        rc = self._L.mcpy_query_task(h, hi, lo, vals, client, _NAME_LEN, msg, _MESSAGE_LEN)  # type: ignore[attr-defined]
        if rc != 0:
            _lib.clear_py_error()  # the library's text is the last error
            return None, rc
        return (
            QueryTaskResponse(
                id=(hi, lo),
                type=TaskType(vals[0]),
                status=TaskStatus(vals[1]),
                created_at_ms_epoch=vals[2],
                last_updated_at_ms_epoch=vals[3],
                assigned_client=client.value.decode(errors="replace"),
                message=msg.value.decode(errors="replace"),
            ),
            0,
        )

    @staticmethod
    def _task_id(rc: int, out: Any) -> Tuple[UUID, int]:
        if rc != 0:
            _lib.clear_py_error()  # the library's text is the last error
            return (0, 0), rc
        return (int(out[0]), int(out[1])), 0
