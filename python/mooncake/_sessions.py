"""Mooncake's layer-wise ranged sessions and KV-session calls, mixed into
MooncakeDistributedStore.

Put sessions (batch_put_session_start, batch_put_from_multi_buffer_ranges,
batch_put_session_end, batch_put_session_revoke): objects are reserved at start, their byte
ranges written by many calls (one per layer, as the engine produces them) straight into the
workers' memory, and made visible at the end, each object whole or not at all, all of one
end call in one commit. Get sessions (batch_get_session_start,
batch_get_into_multi_buffer_ranges, batch_get_session_end): one lookup at start, then ranges
read straight from the workers. Sessions belong to the store object, not to a thread.

The KV-session calls of Mooncake's main (pin_kv_session ... attach_kv_session): a registry of
conversation ids whose member objects get soft-pin priority, kept by the masters in raft.
Control failures raise RuntimeError naming the code, as Mooncake's binding does; attach
returns a code per key. docs/python.md, "KV sessions"."""

import ctypes
from typing import Any, List, Optional, Sequence

from . import _kvtags, _lib
from ._args import _INVALID, Key, _addrs, _batched, _chunks, _cp, _key, _keys, _not_set_up, _seq, _sizes, _sz, _vp
from ._config import ReplicateConfig
from ._types import ErrorCode


def _flatten_ranges(n: int, all_ptrs: Any, all_sizes: Any, all_offsets: Any, what: str):
    """(range counts, flat pointers, flat sizes, flat offsets, starts) where key i's ranges
    are flat[starts[i]:starts[i+1]]; None (an error recorded) when the shapes differ."""
    all_ptrs, all_sizes = _seq(all_ptrs, "all_buffer_ptrs"), _seq(all_sizes, "all_sizes")
    all_offsets = _seq(all_offsets, what)
    if not len(all_ptrs) == len(all_sizes) == len(all_offsets) == n:
        _lib.set_error(f"{n} keys but {len(all_ptrs)} buffer lists, {len(all_sizes)} size lists, {len(all_offsets)} offset lists")
        return None
    counts: List[int] = []
    ps: List[int] = []
    ns: List[int] = []
    offs: List[int] = []
    starts = [0]
    for i in range(n):
        p_i, s_i = _addrs(all_ptrs[i], "all_buffer_ptrs[i]"), _sizes(all_sizes[i], "all_sizes[i]")
        o_i = _sizes(all_offsets[i], f"{what}[i]")
        if not len(p_i) == len(s_i) == len(o_i):
            _lib.set_error(f"key {i}: {len(p_i)} buffers, {len(s_i)} sizes, {len(o_i)} offsets")
            return None
        counts.append(len(p_i))
        ps.extend(p_i)
        ns.extend(s_i)
        offs.extend(o_i)
        starts.append(len(ps))
    return counts, ps, ns, offs, starts


def _kv_unsupported(call: str) -> RuntimeError:
    msg = f"{call}: KV sessions are not in mooncake-go yet (NOT_SUPPORTED, {int(ErrorCode.NOT_SUPPORTED)})"
    _lib.set_error(msg)
    return RuntimeError(msg)


class SessionMethods:
    # -- put sessions --

    def batch_put_session_start(self, keys: Sequence[Key], sizes: Sequence[int], config: Optional[ReplicateConfig] = None) -> List[int]:
        """Opens a put session per key: keys[i] (sizes[i] bytes) is placed and reserved,
        invisible until batch_put_session_end. One code per key: 0, OBJECT_ALREADY_EXISTS
        (stored already, or a session open in this store), NO_AVAILABLE_HANDLE (no room)."""
        ks = _keys(keys)
        n = len(ks)
        ns = _sizes(_seq(sizes, "sizes"), "sizes")
        if len(ns) != n:
            _lib.set_error(f"{n} keys but {len(ns)} sizes")
            return [_INVALID] * n
        c = _lib.config(config)
        tags = _kvtags.check(config, n)
        if tags is _kvtags.BAD:
            return _kvtags.invalid(n)
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return [_not_set_up()] * n
        fn = self._L.mooncake_store_batch_put_session_start  # type: ignore[attr-defined]
        rs = _batched(n, ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), _sz(ns[i:j]), j - i, c, res))
        if tags:
            # The tags join at the session's end, when the objects are stored (_kvtags.py).
            pending = self.__dict__.setdefault("_kv_pending", {})
            for i, rc in enumerate(rs):
                if rc == 0 and tags[i]:
                    pending[ks[i]] = tags[i]
        return rs

    def batch_put_from_multi_buffer_ranges(
        self,
        keys: Sequence[Key],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        all_dst_offsets: Sequence[Sequence[int]],
    ) -> List[int]:
        """Writes, for each key with an open put session, all_sizes[i][j] bytes from
        all_buffer_ptrs[i][j] at offset all_dst_offsets[i][j] of the object. Per key: the bytes
        written (the sum of its sizes) or a negative code (INVALID_PARAMS: no session, a range
        outside the object; a failed write fails the key's session: revoke it)."""
        return self._ranges("mooncake_store_batch_put_from_multi_buffer_ranges", keys, all_buffer_ptrs, all_sizes, all_dst_offsets, "all_dst_offsets")

    def batch_put_session_end(self, keys: Sequence[Key]) -> List[int]:
        """Makes each key's object visible, whole; all keys of the call in one commit. Per key
        0 or a code (INVALID_PARAMS: no session, or bytes never written; INVALID_VERSION: the
        reservation is gone). A failed key stays for batch_put_session_revoke."""
        rs = self._keys_call("mooncake_store_batch_put_session_end", keys)
        pending = self.__dict__.get("_kv_pending")
        if not pending:
            return rs
        ks = _keys(keys)
        tags = [pending.pop(k, []) if rc == 0 else pending.get(k, []) for k, rc in zip(ks, rs)]
        return _kvtags.attach(self, ks, tags, rs)

    def batch_put_session_revoke(self, keys: Sequence[Key]) -> List[int]:
        """Abandons put sessions: nothing becomes visible, the space is freed at once. Per key
        0 or INVALID_PARAMS (no session)."""
        pending = self.__dict__.get("_kv_pending")
        if pending:
            for k in _keys(keys):
                pending.pop(k, None)
        return self._keys_call("mooncake_store_batch_put_session_revoke", keys)

    # -- get sessions --

    def batch_get_session_start(self, keys: Sequence[Key]) -> List[int]:
        """Opens (or refreshes) a get session per key: one lookup; per key 0 or
        OBJECT_NOT_FOUND."""
        return self._keys_call("mooncake_store_batch_get_session_start", keys)

    def batch_get_into_multi_buffer_ranges(
        self,
        keys: Sequence[Key],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        all_src_offsets: Sequence[Sequence[int]],
    ) -> List[int]:
        """Reads, for each key with an open get session, all_sizes[i][j] bytes at offset
        all_src_offsets[i][j] of the object into all_buffer_ptrs[i][j]. Per key: the bytes read
        or a negative code (INVALID_PARAMS: no session, a range past the end)."""
        return self._ranges("mooncake_store_batch_get_into_multi_buffer_ranges", keys, all_buffer_ptrs, all_sizes, all_src_offsets, "all_src_offsets")

    def batch_get_session_end(self, keys: Sequence[Key]) -> int:
        """Ends get sessions (keys without one are ignored); 0, as Mooncake (a code when the
        store is not set up)."""
        ks = _keys(keys)
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return _not_set_up()
        fn = self._L.mooncake_store_batch_get_session_end  # type: ignore[attr-defined]
        for i, j in _chunks(len(ks)):
            rc = fn(h, _cp(ks[i:j]), j - i)
            if rc < 0:
                return rc
        return 0

    def _keys_call(self, name: str, keys: Sequence[Key]) -> List[int]:
        ks = _keys(keys)
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return [_not_set_up()] * len(ks)
        fn = getattr(self._L, name)  # type: ignore[attr-defined]
        return _batched(len(ks), ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), j - i, res))

    def _ranges(self, name: str, keys: Sequence[Key], all_ptrs: Any, all_sizes: Any, all_offsets: Any, what: str) -> List[int]:
        ks = _keys(keys)
        n = len(ks)
        flat = _flatten_ranges(n, all_ptrs, all_sizes, all_offsets, what)
        if flat is None:
            return [_INVALID] * n
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return [_not_set_up()] * n
        counts, ps, ns, offs, at = flat
        fn = getattr(self._L, name)  # type: ignore[attr-defined]
        return _batched(
            n,
            ctypes.c_int64,
            lambda i, j, res: fn(
                h, _cp(ks[i:j]), j - i, _vp(ps[at[i] : at[j]]), _sz(ns[at[i] : at[j]]),
                (ctypes.c_uint64 * (at[j] - at[i]))(*offs[at[i] : at[j]]), _sz(counts[i:j]), res,
            ),
        )

    # -- KV sessions (Mooncake's main: session-aware membership and soft pin) --

    def pin_kv_session(self, session_id: str) -> int:
        """Gives the session's current and future members soft-pin priority (no TTL). 0;
        RuntimeError (SESSION_NOT_FOUND: no session of that id; register keys first)."""
        return self._kv_control("mooncake_store_pin_kv_session", "pin_kv_session", session_id)

    def unpin_kv_session(self, session_id: str) -> int:
        """Lifts the session's pin (memberships and other sessions' pins stay). 0;
        RuntimeError (SESSION_NOT_FOUND)."""
        return self._kv_control("mooncake_store_unpin_kv_session", "unpin_kv_session", session_id)

    def close_kv_session(self, session_id: str) -> int:
        """Removes every association of the session (objects stay). 0, also for an absent
        session."""
        return self._kv_control("mooncake_store_close_kv_session", "close_kv_session", session_id)

    def update_kv_session(self, session_id: str, keep_keys: Sequence[str]) -> int:
        """Keeps only the members in keep_keys, one complete keep set (never split it into
        several calls); unknown keys are ignored, objects never deleted, an absent session is
        0. A session left empty is removed with its pin."""
        ks = _keys(keep_keys)
        return self._kv_control("mooncake_store_update_kv_session", "update_kv_session", session_id, _cp(ks), len(ks))

    def get_kv_session(self, session_id: str) -> "KvSessionInfo":
        """KvSessionInfo(session_id, pinned, member_count); RuntimeError (SESSION_NOT_FOUND)."""
        pinned, count = ctypes.c_int(0), ctypes.c_uint64(0)
        self._kv_control("mooncake_store_get_kv_session", "get_kv_session", session_id, ctypes.byref(pinned), ctypes.byref(count))
        return KvSessionInfo(session_id, bool(pinned.value), count.value)

    def list_kv_session_keys(self, session_id: str, cursor: str = "", limit: int = 1024) -> "KvSessionPage":
        """KvSessionPage(keys, next_cursor): up to limit (1 to 4096) member keys after cursor
        in lexical order; continue with next_cursor until it is "". RuntimeError
        (SESSION_NOT_FOUND, INVALID_PARAMS)."""
        if type(limit) is bool or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, not {type(limit).__name__}")
        if limit < 0:
            raise _kv_error("list_kv_session_keys", int(ErrorCode.INVALID_PARAMS), f"limit {limit}")
        out = ctypes.c_void_p()
        n = self._kv_control(
            "mooncake_store_list_kv_session_keys", "list_kv_session_keys", session_id, _key(cursor), limit, ctypes.byref(out)
        )
        try:
            parts = ctypes.string_at(out.value, n).split(b"\0")[:-1] if n > 0 and out.value else [b""]
        finally:
            if out.value:
                self._L.mooncake_store_free_buffer(out)  # type: ignore[attr-defined]
        return KvSessionPage([p.decode("utf-8", "surrogateescape") for p in parts[:-1]], parts[-1].decode("utf-8", "surrogateescape"))

    def attach_kv_session(self, session_id: str, keys: Sequence[str]) -> List[int]:
        """Adds keys to the session, creating it (unpinned) on its first member. One code per
        key: 0, OBJECT_NOT_FOUND, SESSION_LIMIT_EXCEEDED; INVALID_PARAMS for every key when
        the id is invalid or there are more than 4096 keys (not a cross-key transaction)."""
        ks = _keys(keys)
        n = len(ks)
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return [_not_set_up()] * n
        sid = _kv_id(session_id)
        if sid is None or n > _MAX_ATTACH:
            _lib.set_error(f"attach_kv_session: invalid session id or {n} keys (at most {_MAX_ATTACH})")
            return [_INVALID] * n
        if n == 0:
            return []
        res = (ctypes.c_int * n)()
        rc = self._L.mooncake_store_attach_kv_session(h, sid, _cp(ks), n, res)  # type: ignore[attr-defined]
        return [rc] * n if rc < 0 else list(res)

    def _kv_control(self, name: str, call: str, session_id: str, *args: Any) -> int:
        """Runs a KV-session control call: its result (>= 0), or RuntimeError naming the code,
        as Mooncake's binding raises when a control call fails."""
        h = self._h  # type: ignore[attr-defined]
        if not h:
            rc = _not_set_up()
            raise _kv_error(call, rc, _lib.last_error())
        sid = _kv_id(session_id)
        if sid is None:
            raise _kv_error(call, _INVALID, "session id must be 1 to 4096 bytes without NUL")
        rc = getattr(self._L, name)(h, sid, *args)  # type: ignore[attr-defined]
        if rc < 0:
            raise _kv_error(call, rc, _lib.last_error())
        return 0 if rc is None else rc


# attach_kv_session's bound on keys per call (Mooncake's MC_KV_SESSION_MAX_BATCH default).
_MAX_ATTACH = 4096


def _kv_id(session_id: str) -> Optional[bytes]:
    """The session id as the library takes it; None when Mooncake refuses it (empty, over
    4096 bytes, a NUL)."""
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    b = session_id.encode("utf-8", "surrogatepass")
    if not b or len(b) > 4096 or b"\0" in b:
        return None
    return b


def _kv_error(call: str, rc: int, detail: str) -> RuntimeError:
    try:
        name = ErrorCode(rc).name
    except ValueError:
        name = "UNKNOWN"
    msg = f"{call}: {name} ({rc}): {detail}"
    _lib.set_error(msg)
    return RuntimeError(msg)


class KvSessionInfo:
    """Mooncake's KvSessionInfo: session_id, pinned, member_count."""

    __slots__ = ("session_id", "pinned", "member_count")

    def __init__(self, session_id: str, pinned: bool, member_count: int) -> None:
        self.session_id, self.pinned, self.member_count = session_id, pinned, member_count

    def __repr__(self) -> str:
        return f"KvSessionInfo(session_id={self.session_id!r}, pinned={self.pinned}, member_count={self.member_count})"


class KvSessionPage:
    """Mooncake's KvSessionPage: keys (lexical order) and next_cursor ("" on the last page)."""

    __slots__ = ("keys", "next_cursor")

    def __init__(self, keys: List[str], next_cursor: str) -> None:
        self.keys, self.next_cursor = keys, next_cursor

    def __repr__(self) -> str:
        return f"KvSessionPage(keys={self.keys!r}, next_cursor={self.next_cursor!r})"
