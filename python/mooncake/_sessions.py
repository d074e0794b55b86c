"""Mooncake's layer-wise ranged sessions and KV-session calls, mixed into
MooncakeDistributedStore.

Put sessions (batch_put_session_start, batch_put_from_multi_buffer_ranges,
batch_put_session_end, batch_put_session_revoke): objects are reserved at start, their byte
ranges written by many calls (one per layer, as the engine produces them) straight into the
workers' memory, and made visible at the end, each object whole or not at all, all of one
end call in one commit. Get sessions (batch_get_session_start,
batch_get_into_multi_buffer_ranges, batch_get_session_end): one lookup at start, then ranges
read straight from the workers. Sessions belong to the store object, not to a thread.

The KV-session calls of Mooncake's main (pin_kv_session ... attach_kv_session) are not in
mooncake-go yet: they raise RuntimeError (attach returns NOT_SUPPORTED per key), never
pretend to work. docs/python.md, "Layer-wise sessions"."""

import ctypes
from typing import Any, List, Optional, Sequence

from . import _lib
from ._args import _INVALID, Key, _addrs, _batched, _chunks, _cp, _keys, _not_set_up, _seq, _sizes, _sz, _vp
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
        h = self._h  # type: ignore[attr-defined]
        if not h:
            return [_not_set_up()] * n
        fn = self._L.mooncake_store_batch_put_session_start  # type: ignore[attr-defined]
        return _batched(n, ctypes.c_int, lambda i, j, res: fn(h, _cp(ks[i:j]), _sz(ns[i:j]), j - i, c, res))

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
        return self._keys_call("mooncake_store_batch_put_session_end", keys)

    def batch_put_session_revoke(self, keys: Sequence[Key]) -> List[int]:
        """Abandons put sessions: nothing becomes visible, the space is freed at once. Per key
        0 or INVALID_PARAMS (no session)."""
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

    # -- KV sessions (Mooncake's main): not in mooncake-go yet --

    def pin_kv_session(self, session_id: str) -> int:
        """Not supported yet: raises RuntimeError (Mooncake raises on a control failure)."""
        raise _kv_unsupported("pin_kv_session")

    def unpin_kv_session(self, session_id: str) -> int:
        """Not supported yet: raises RuntimeError."""
        raise _kv_unsupported("unpin_kv_session")

    def close_kv_session(self, session_id: str) -> int:
        """Not supported yet: raises RuntimeError."""
        raise _kv_unsupported("close_kv_session")

    def update_kv_session(self, session_id: str, keep_keys: Sequence[str]) -> int:
        """Not supported yet: raises RuntimeError."""
        raise _kv_unsupported("update_kv_session")

    def get_kv_session(self, session_id: str) -> Any:
        """Not supported yet: raises RuntimeError."""
        raise _kv_unsupported("get_kv_session")

    def list_kv_session_keys(self, session_id: str, cursor: str = "", limit: int = 1024) -> Any:
        """Not supported yet: raises RuntimeError."""
        raise _kv_unsupported("list_kv_session_keys")

    def attach_kv_session(self, session_id: str, keys: Sequence[str]) -> List[int]:
        """Not supported yet: NOT_SUPPORTED for every key (Mooncake returns a code per key)."""
        _kv_unsupported("attach_kv_session")
        return [int(ErrorCode.NOT_SUPPORTED)] * len(_seq(keys, "keys"))
